# %% [markdown]
# # 张量与 GPU：张量放在哪里，怎样搬动
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/03-tensors-and-gpus.ipynb)
#
# 这些课在 GPU 上打印的结果：[notebooks/gpu](../gpu/README.md)。
#
# **你将学到**
#
# - 怎样查看张量在哪个设备上，为什么一次运算的所有操作数必须在同一个设备上；
# - 怎样直接在 GPU 显存里创建张量；
# - 怎样把张量复制到另一个设备，`.to()` 什么时候复制；
# - PyTorch 为什么从不替我们复制，哪些常用的调用会把数据复制到内存。
#
# **你需要**
#
# - 先读过 [02 – 计算设备](02-computing-devices.ipynb)；GPU 不是必需的。有两块 GPU 时，两卡之间的复制会真的发生。
#
# 代码与英文版相同（只有注释是中文），单元格打印的输出是英文；输出里的用语见[术语表](README.md#代码和输出)。

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
print("devices the helpers will use:", ", ".join(map(str, d2l_gpu.try_all_gpus())))
if d2l_gpu.num_gpus() == 0:
    print("No GPU found: every cell still runs on the CPU; the text says what a GPU shows.")

# %% [markdown]
# ## 张量在哪个设备上？
#
# 不指定设备时，新张量放在 CPU 上，它的 `device` 属性会告诉我们这一点。

# %%
x = torch.tensor([1, 2, 3])
x.device

# %% [markdown]
# ## 一次运算，一个设备
#
# 两个张量相加，需要把两者都读进来，再把和写到某处。如果一个在内存里，另一个在 GPU 显存里，PyTorch 就只能猜测在哪里计算，而无论怎么猜，都意味着一次隐藏的复制。所以它直接拒绝。（有一个特意保留的例外：零维的 CPU 张量实际上就是一个数，可以和 GPU 张量一起运算。）
#
# 这种拒绝在任何机器上都能看到。`meta` 设备只记录张量的形状和数据类型，不存数据，所以没有开销，任何 PyTorch 安装包（包括只支持 CPU 的）都带有它。这里让它充当第二个设备：

# %%
on_cpu = torch.ones(2, 3)
on_meta = torch.ones(2, 3, device="meta")
try:
    on_cpu + on_meta
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# GPU 用户看到的措辞不同，因为 `meta` 设备用自己的方式检查输入。把一个 CPU 张量和第一块 CUDA GPU 上的张量相加，会得到这条报错信息：
#
# > RuntimeError: Expected all tensors to be on the same device, but found at
# > least two devices, cuda:0 and cpu!
#
# 有 GPU 时，下一个单元格真的犯一次这个错误；没有 GPU 时，它打印上面这条信息。

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
# 把张量放到 GPU 上，最简单的办法是用 `device` 参数直接在 GPU 上创建它，元素直接写进那块 GPU 的显存。没有 GPU 时，`try_gpu()` 返回 CPU；在 GPU 上，打印结果的末尾是 `device='cuda:0'`。

# %%
X = torch.ones(2, 3, device=d2l_gpu.try_gpu())
X

# %% [markdown]
# `X` 的数据所占的字节数，等于元素个数乘以每个元素的字节数：

# %%
print(f"{X.nelement()} elements x {X.element_size()} bytes = {X.nbytes} bytes")

# %% [markdown]
# PyTorch 在 GPU 上实际分配的更多，至少 512 字节。GPU 显存里有什么，张量放不下时会怎样，是 [08 – GPU 显存](08-gpu-memory.ipynb) 的内容。
#
# ## 复制
#
# 假设 `X` 在一个设备上，`Y` 在另一个设备上，我们想计算 `X + Y`。原书把 `X` 放在第一块 GPU 上，把随机张量 `Y` 放在第二块上。只有一块 GPU 时，最要紧的复制是训练中每个批次都要做的那一次：从内存复制到 GPU。所以这时下一个单元格在内存里创建 `X`，在 GPU 上创建 `Y`。没有 GPU 时，两者都在 CPU 上。

# %%
gpus = d2l_gpu.try_all_gpus()
if len(gpus) >= 2:  # 原书的情形：GPU 0 和 GPU 1
    X = torch.ones(2, 3, device=gpus[0])
    Y = torch.rand(2, 3, device=gpus[1])
else:  # X 放在内存里，和每批数据一开始所在的位置一样
    X = torch.ones(2, 3)
    Y = torch.rand(2, 3, device=gpus[0])
print(f"X is on {X.device}, Y is on {Y.device}")

# %% [markdown]
# 两者在不同设备上时，直接相加会失败：

# %% tags=["nbval-ignore-output"]
if X.device == Y.device:
    print(f"X and Y are both on {X.device}: X + Y works as it is.")
else:
    try:
        X + Y
    except RuntimeError as error:
        print(f"{type(error).__name__}: {str(error).splitlines()[0]}")

# %% [markdown]
# 所以先把 `X` 复制到 `Y` 所在的设备，把副本叫作 `Z`，再和 `Y` 相加。下面打印 `X` 和 `Z`：

# %%
Z = X.to(Y.device)
print(X)
print(Z)

# %% [markdown]
# `X` 和 `Z` 的值相同。有两块 GPU 时，它们分别显示 `cuda:0` 和 `cuda:1`：数据从一块卡复制到了另一块。只有一块 GPU 时，`X` 打印时不带设备，`Z` 带着 `cuda:0`：数据从内存复制到了 GPU。这个单元格还没有在 GPU 上运行过。没有 GPU 时，`X` 已经在 `Y` 所在的设备上，
# `X.to(Y.device)` 什么也不复制，`Z` *就是* `X`。下一个单元格说明这里是哪种情况。

# %% tags=["nbval-ignore-output"]
print(f"X on {X.device}, Z on {Z.device}; Z is X: {Z is X}")

# %% [markdown]
# 无论哪种情况，两个操作数现在都在同一个设备上了：

# %%
print("Y + Z equals Y + 1:", torch.equal(Y + Z, Y + 1))

# %% [markdown]
# ### `.to()` 什么时候复制
#
# `Z` 已经在 `Y` 所在的设备上，所以 `Z.to(Z.device)` 不花任何代价：它返回的就是同一个张量。加上 `copy=True` 时，它会分配新的存储，并复制每一个元素。（在原书的两块 GPU 上，`Z.cuda(1)` 同样返回 `Z` 本身。）
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
# 人们买 GPU 是为了速度，而速度恰恰容易丢在数据搬运上。所以 PyTorch 从不替我们搬运操作数：崩溃能指出问题所在，悄悄的复制却只会让程序变慢，还不说明原因。
# [04 – 异步与传输](04-asynchrony-and-transfers.ipynb) 会测量以下三点：
#
# - 与计算相比，数据传输很慢：通往 GPU 的总线每秒最多搬 32 或 64 GB（按 PCIe 4.0 或 5.0 的规范），数据中心 GPU 的显存带宽则是每秒 2 到 8 TB（NVIDIA 数据手册，A100 到 B200），是总线的 50 到 125 倍（Colab 的 T4 上约为 20 倍）；
# - 每次传输都有固定开销，所以许多次小传输远不如一次大传输；
# - 有些调用会让 CPU 停下来等 GPU，就像在咖啡店柜台前排队等候，而不是提前打电话订好。等待期间，队列里不会排进新的工作。
#
# ### 打印和 NumPy 都要经过内存
#
# `print` 需要数值在内存里，所以对 GPU 张量，它会先把数据复制到主机。`.numpy()` 则不会：对 GPU 张量调用它，会抛出 `TypeError`，要求先调用 `.cpu()`。用 `meta` 张量，在任何机器上都能看到这种拒绝：

# %%
try:
    torch.ones(2, device="meta").numpy()
except TypeError as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# 有三个调用能把任何设备上的数值取回主机：`.cpu()` 得到 CPU 张量，`.tolist()` 得到 Python 数值，
# `.item()` 得到单元素张量里的那个数。

# %%
device = d2l_gpu.try_gpu()
t = torch.arange(4.0, device=device)
print(t.cpu().numpy(), t.tolist(), t[-1].item())

# %% [markdown]
# 对已经在 CPU 上的张量，`.cpu()` 返回它本身，`.numpy()` 和它共用内存。对 GPU 张量，`.cpu()` 则是一次真正的复制，数据写进新分配的主机内存。下一个单元格打印这里是哪种情况。

# %% tags=["nbval-ignore-output"]
on_host = t.cpu()
print(f"t is on {t.device}; t.cpu() is t: {on_host is t}")
print("NumPy array shares t's memory:", on_host.numpy().ctypes.data == t.data_ptr())

# %% [markdown]
# ## 本课小结
#
# - 张量的 `device` 说明它放在哪里。新张量默认放在 CPU 上，除非用 `device=` 在别处创建。
# - 一次运算的所有操作数必须在同一个设备上。混用设备会报错，报错信息写明了两个设备。
# - `X.to(Y.device)` 把 `X` 复制到 `Y` 所在的设备。张量已经在目标设备上时，`.to()` 返回它本身，加上 `copy=True` 才真正复制。
# - 搬运数据会损耗速度，所以 PyTorch 从不替我们搬运操作数；
#   `print`、`.cpu()`、`.tolist()` 和 `.item()` 会把数据复制到内存。
#
# 下一课：[04 – 异步与传输](04-asynchrony-and-transfers.ipynb)，测量等待 GPU 和向它搬运数据的代价。
