# %% [markdown]
# # 张量与 GPU：张量放在哪里，怎样搬动
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/03-tensors-and-gpus.ipynb)
#
# 在 NVIDIA H200 上运行的结果：[输出](../gpu/nvidia-h200/zh/03-tensors-and-gpus.ipynb)（较早版本）。
#
# **你将学到**
#
# - 怎样查看张量在哪个设备上，为什么一次运算的所有操作数必须在同一个设备上；
# - 怎样直接在 GPU 显存里创建张量，放在第一块 GPU 上或第二块 GPU 上；
# - 怎样把张量复制到另一个设备，`.to()` 什么时候复制、什么时候不复制；
# - PyTorch 为什么不替我们复制，而哪些常用的调用（`print`、NumPy）会把数据复制到内存。
#
# **你需要**
#
# - 先读过 [02 – 计算设备](02-computing-devices.ipynb)；GPU 不是必需的，
#   有两块 GPU 时，两卡之间的复制会真的发生。
#
# 代码单元格的输出（包括图中的标注）都是英文的，中文笔记本也一样。

# %% tags=["nbval-ignore-output"]
import sys

if "google.colab" in sys.modules:  # Colab: add d2l_gpu and keep Colab's own torch
    get_ipython().run_line_magic(
        "pip", "install --quiet --no-deps git+https://github.com/d2l-gpu/d2l-gpu"
    )

import torch

import d2l_gpu

torch.manual_seed(0)
print(f"torch {torch.__version__}, d2l_gpu {d2l_gpu.__version__}")
print("devices the helpers will use:", d2l_gpu.try_all_gpus())
if d2l_gpu.num_gpus() == 0:
    print("No GPU found: every cell still runs on the CPU; the text says what a GPU shows.")

# %% [markdown]
# ## 张量在哪个设备上？
#
# 不加说明的话，新建的张量放在 CPU 上，它的 `device` 属性会如实告诉我们。

# %%
x = torch.tensor([1, 2, 3])
x.device

# %% [markdown]
# ## 一次运算，一个设备
#
# 两个张量相加，总得有谁把两者都读进来，再把和写到某个地方。
# 如果一个在内存里、另一个在 GPU 显存里，PyTorch 就只能去猜在哪里算、结果放在哪里，
# 而无论怎么猜，都意味着一次暗中的复制。所以它干脆拒绝。
# （有一个特意留下的例外：零维的 CPU 张量，实际上就是一个数，可以和 GPU 张量一起运算。）
#
# 这种拒绝在任何机器上都看得到。`meta` 设备只记录张量的形状和类型，不存任何数据，
# 因而没有开销，每个 PyTorch 版本都有。这里让它充当第二个设备。
# 错误被捕获下来，只打印一行，所以这个笔记本也能当作普通脚本运行：

# %%
on_cpu = torch.ones(2, 3)
on_meta = torch.ones(2, 3, device="meta")
try:
    on_cpu + on_meta
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# 报错的措辞和 GPU 用户实际见到的不一样，因为 `meta` 设备用自己的方式检查输入。
# 把一个 CPU 张量和第一块 CUDA GPU 上的张量相加，得到的是这样的报错信息：
#
# > RuntimeError: Expected all tensors to be on the same device, but found at
# > least two devices, cuda:0 and cpu!
#
# 有 GPU 时，下一个单元格会真的犯一次这个错误。没有 GPU 时，找不到第二个设备来混用，
# 单元格就打印上面这条信息，而不是装作出了错。

# %% tags=["nbval-ignore-output"]
gpu = d2l_gpu.try_gpu()
if gpu.type == "cpu":
    print("No GPU here. On a machine with a CUDA GPU this cell prints:")
    print(
        "RuntimeError: Expected all tensors to be on the same device, "
        "but found at least two devices, cuda:0 and cpu!"
    )
else:
    try:
        torch.ones(2, 3) + torch.ones(2, 3, device=gpu)
    except RuntimeError as error:
        print(f"{type(error).__name__}: {str(error).splitlines()[0]}")

# %% [markdown]
# ## 在 GPU 上存储
#
# 把张量放上 GPU，最简单的办法是用 `device` 参数直接在那里创建它。
# 这样元素会被直接写进那块 GPU 的显存，也只占用那块 GPU 的显存。
# 在没有 GPU 的机器上，`try_gpu()` 给出 CPU，`X` 就是个寻常的张量；
# 在 GPU 上，它的打印结果末尾会多出 `device='cuda:0'`。

# %%
X = torch.ones(2, 3, device=d2l_gpu.try_gpu())
X

# %% [markdown]
# `X` 占用的存储是它的元素个数乘以每个元素的字节数：

# %%
print("elements:", X.nelement(), "bytes each:", X.element_size(), "bytes in all:", X.nbytes)

# %% [markdown]
# 怎样读出 GPU 显存里有什么，张量放不下时又会怎样，是 [04 – GPU 显存](04-gpu-memory.ipynb) 的内容。
#
# 接下来原书在第二块 GPU 上创建一个随机张量。`try_gpu(1)` 在有第二块 GPU 时返回它，
# 否则返回 CPU，单元格会说明实际是哪种情况。随机数的值取决于各设备自己的随机数生成器，
# 所以在第二块 GPU 上生成的值与 CPU 上的不同；GPU 不足两块时，`Y` 在 CPU 上生成，值也就是 CPU 的值。
# 形状则处处一样。

# %% tags=["nbval-ignore-output"]
Y = torch.rand(2, 3, device=d2l_gpu.try_gpu(1))
if d2l_gpu.num_gpus() < 2:
    print(f"No second GPU: Y was created on {Y.device} instead.")
Y

# %%
print("Y:", tuple(Y.shape), Y.dtype)

# %% [markdown]
# ## 复制
#
# 假设 `X` 在第一块 GPU 上，`Y` 在第二块上，我们想算 `X + Y`。前面已经看到，
# 直接相加会失败。要先把 `X` 复制到 `Y` 所在的设备，把这份副本叫作 `Z`，再在那里相加。
# 下图画出了有两块 GPU 时的做法：

# %%
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

fig, ax = plt.subplots(figsize=(7.5, 2.8))
ax.set(xlim=(0, 11), ylim=(0, 4))
ax.axis("off")
for left, name in [(0.2, "CPU"), (3.8, "GPU 0"), (7.4, "GPU 1")]:
    outline = FancyBboxPatch((left, 0.3), 3.2, 3.2, boxstyle="round,pad=0.05", fc="whitesmoke")
    ax.add_patch(outline)
    ax.text(left + 1.6, 3.15, name, ha="center", weight="bold")
ax.text(
    1.8, 1.8, "main memory;\nPython queues\nthe work", ha="center", va="center", color="dimgray"
)
places = {"X": (5.0, 2.3), "Y": (8.1, 2.5), "Z": (8.1, 1.1), "Y + Z": (9.9, 1.8)}
for label, (x, y) in places.items():
    box = {"boxstyle": "round", "fc": "lightyellow", "ec": "black"}
    ax.text(x, y, label, ha="center", va="center", size=12, bbox=box)
for start, end, color in [
    ("X", "Z", "tab:red"),
    ("Y", "Y + Z", "tab:blue"),
    ("Z", "Y + Z", "tab:blue"),
]:
    arrow = {"arrowstyle": "-|>", "mutation_scale": 14, "shrinkA": 14, "shrinkB": 18}
    line = FancyArrowPatch(places[start], places[end], color=color, **arrow)
    ax.add_patch(line)
ax.text(5.4, 0.7, "copy: Z = X.to('cuda:1')", ha="center", size=9, color="tab:red")
ax.text(9.9, 2.5, "add", ha="center", size=9, color="tab:blue")
plt.show()

# %% [markdown]
# 有两块 GPU 时，下一个单元格会展示这个错误。只有一块 GPU 时，`Y` 退回到了 CPU 上，
# 于是这个单元格报的是 GPU 与 CPU 混用的错误，下面的复制则是从 GPU 搬回内存。
# 没有 GPU 时，`X` 和 `Y` 都在 CPU 上，也就无从在设备之间复制。

# %% tags=["nbval-ignore-output"]
if X.device == Y.device:
    print(f"X and Y are both on {X.device}: X + Y works as it is.")
else:
    try:
        X + Y
    except RuntimeError as error:
        print(f"{type(error).__name__}: {str(error).splitlines()[0]}")

# %% [markdown]
# 现在复制，并把两个张量都打印出来：

# %%
Z = X.to(Y.device)
print(X)
print(Z)

# %% [markdown]
# `X` 和 `Z` 的值相同；有两块 GPU 时，它们打印出的设备不同，分别是 `cuda:0` 和 `cuda:1`。
# 只有一块 GPU 时，`X` 在 GPU 上，`Y` 在 CPU 上，于是 `Z` 是 `X` 在内存里的副本，打印时不带设备。
# 没有 GPU 时，`X` 本来就和 `Y` 在一起，`X.to(Y.device)` 什么也不复制，
# `Z` *就是* `X`，同一个对象。下一个单元格说明这里属于哪种情况。

# %% tags=["nbval-ignore-output"]
print(f"X on {X.device}, Z on {Z.device}; Z is X: {Z is X}")

# %% [markdown]
# 无论哪种情况，求和的两个操作数现在都在同一个地方了：

# %%
print("Y + Z equals Y + 1:", torch.equal(Y + Z, Y + 1))

# %% [markdown]
# ### `.to()` 什么时候复制
#
# `Z` 已经和 `Y` 在一起。再要求把它移过去不花任何代价：`.to()` 返回的就是同一个张量对象。
# 加上 `copy=True` 时，即使设备没变，它也会另外分配一块存储，并复制每一个元素。
# 原书的 Java 接口用一个布尔参数区分这两种情况；PyTorch 里的 `Z.cuda(1)` 相当于不复制的写法。
# `data_ptr()` 是张量第一个元素的地址，用它可以看出两个张量是否共用同一块存储。

# %%
W = Z.to(Z.device, copy=True)
print("Z.to(Z.device) is Z:", Z.to(Z.device) is Z)
print("W is Z:             ", W is Z)
print("same memory:        ", W.data_ptr() == Z.data_ptr())
print("same values:        ", torch.equal(W, Z))

# %% [markdown]
# ## 旁注
#
# 人们买 GPU 是为了速度，而速度恰恰容易丢在设备之间的数据搬运上。
# 这就是 PyTorch 从不为了让一次运算能做下去而替我们搬动操作数的原因：
# 崩溃能指出问题所在，悄悄的复制只会让程序变慢，还不告诉你为什么。
# 有三点值得了解，[05 – 异步与传输](05-asynchrony-and-transfers.ipynb) 会逐一测量：
#
# - 与它要喂给的运算相比，传输很慢：内存和 GPU 之间靠总线（PCIe）通信，每秒只能搬几十 GB，
#   而 GPU 读自己的显存，每秒可达几百 GB 到数 TB；
# - 每次传输都有固定开销，所以许多次小传输远不如一次大传输，
#   许多个小运算也比不上一次完成同样工作的大运算；
# - 有些调用会让 CPU 停下来等 GPU，就像站在咖啡柜台前干等，而不是提前打电话预订：
#   这期间什么新任务也排不进队列。
#
# ### 打印和 NumPy 都要经过内存
#
# 有些调用会自己复制，这是由它们的用途决定的。`print` 需要数值位于内存中，
# 所以对 GPU 张量，它会不声不响地先把数据复制到主机。`.numpy()` 则不会：
# NumPy 数组只能放在内存里，对 GPU 张量调用 `.numpy()` 会抛出 `TypeError`，
# 要求先调用 `.cpu()`。用 `meta` 张量，在任何机器上都能看到同样的拒绝：

# %%
try:
    torch.ones(2, device="meta").numpy()
except TypeError as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# 有三个调用能把任何设备上的数值取回主机：`.cpu()` 得到一个 CPU 张量（`.numpy()` 随后就接受它），
# `.tolist()` 得到 Python 数值，`.item()` 得到单元素张量里的那一个数。

# %%
device = d2l_gpu.try_gpu()
t = torch.arange(4.0, device=device)
print(t.cpu().numpy(), t.tolist(), t[-1].item())

# %% [markdown]
# 对已经在 CPU 上的张量，`.cpu()` 返回它本身，`.numpy()` 与它共用内存，什么也没复制。
# 对 GPU 张量，`.cpu()` 则是一次实实在在的复制，数据写入新的主机内存。
# 下一个单元格打印这里发生的是哪一种。

# %% tags=["nbval-ignore-output"]
on_host = t.cpu()
print(f"t is on {t.device}; t.cpu() is t: {on_host is t}")
print("NumPy array shares t's memory:", on_host.numpy().ctypes.data == t.data_ptr())

# %% [markdown]
# ## 本课小结
#
# - 张量的 `device` 说明它放在哪里；新张量默认放在 CPU 上，除非用 `device=` 在别处创建。
# - 一次运算的所有操作数必须在同一个设备上；混用设备会报错，报错信息里写明了两个设备。
# - `X.to(Y.device)` 把 `X` 复制到 `Y` 所在的设备，之后两者就能相加；
#   对已经在目标设备上的张量，`.to()` 返回它本身，`copy=True` 才会在新分配的存储里真正复制一份。
# - PyTorch 从不替我们搬动操作数，因为搬运数据正是速度流失的地方；
#   `print`、`.cpu()`、`.tolist()` 和 `.item()` 会把数据复制到内存，`.numpy()` 则要求 CPU 张量。
#
# 下一篇：[04 – GPU 显存](04-gpu-memory.ipynb)，读出 GPU 显存里有什么，
# 并稳妥地试一试要的比它有的还多会怎样。
