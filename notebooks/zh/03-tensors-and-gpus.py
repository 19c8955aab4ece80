# %% [markdown]
# # 张量与 GPU：数据放在哪里，搬动它要付出什么
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/03-tensors-and-gpus.ipynb)
#
# **你将学到**
#
# - 怎样查看张量在哪个设备上，为什么一次运算的所有操作数必须在同一个设备上；
# - 怎样直接在 GPU 显存里创建张量，它们占多少内存；
# - 怎样把张量复制到另一个设备，`.to()` 什么时候复制、什么时候不复制；
# - 搬运数据的代价，用实测说话：复制与它所服务的计算相比、许多次小复制与一次大复制相比、
#   循环里的 `.item()` 与最后一次性取回相比，以及锁页内存。
#
# **你需要**
#
# - 先读过 [02 – 计算设备](02-computing-devices.ipynb)；GPU 不是必需的，
#   有两块 GPU 时，两卡之间的复制会真的发生。

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
# 因而没有开销，每个 PyTorch 版本都有。这里让它充当第二个设备：

# %% tags=["raises-exception"]
on_cpu = torch.ones(2, 3)
on_meta = torch.ones(2, 3, device="meta")
on_cpu + on_meta

# %% [markdown]
# 有 GPU 时，下一个单元把一个 CPU 张量和一个 GPU 张量相加，同样会失败，
# 报错信息里会点出两个设备的名字。没有 GPU 时，找不到第二个设备来混用，
# 单元会照实说明，而不是装作出了错。

# %% tags=["raises-exception", "nbval-ignore-output"]
gpu = d2l_gpu.try_gpu()
if gpu.type == "cpu":
    print("No GPU here: there is no CPU-and-GPU pair to add, so nothing fails.")
else:
    torch.ones(2, 3) + torch.ones(2, 3, device=gpu)

# %% [markdown]
# ## 在 GPU 上存储
#
# 把张量放上 GPU，最简单的办法是用 `device` 参数直接在那里创建它。
# 这样元素会被直接写进那块 GPU 的显存，也只占用那块 GPU 的显存。
# 在没有 GPU 的机器上，`try_gpu()` 给出 CPU，`X` 就是个普通张量；
# 在 GPU 上，它的打印结果末尾会多出 `device='cuda:0'`。

# %%
X = torch.ones(2, 3, device=d2l_gpu.try_gpu())
X

# %%
print("elements:", X.nelement(), "bytes each:", X.element_size(), "bytes in all:", X.nbytes)

# %% [markdown]
# 设备已经分出去多少内存，可以直接查询。CUDA 为每块 GPU 维护一个计数器
# `torch.cuda.memory_allocated`；它的分配器按块分配小张量（目前的版本里是 512 字节一块），
# 所以 `X` 的 24 个字节会按块向上取整。Apple 的 MPS 有自己的计数器。
# CPU 则没有这样的计数器：放在那里的张量只是进程普通内存的一部分。

# %% tags=["nbval-ignore-output"]
device = X.device
if device.type == "cuda":
    print(f"memory allocated on {device}: {torch.cuda.memory_allocated(device)} bytes")
elif device.type == "mps":
    print(f"memory allocated on mps: {torch.mps.current_allocated_memory()} bytes")
else:
    print("X is in main memory: PyTorch keeps no per-device counter for the CPU.")

# %% [markdown]
# GPU 的显存比服务器的内存小得多，所以创建大张量之前值得先算一算。
# `meta` 张量能告诉我们某个形状需要多少字节，却一个字节也不分配。
# 向 GPU 要超过它容量的内存，会立刻抛出 `torch.OutOfMemoryError`；
# 在 CPU 上我们不做这个尝试，因为操作系统可能不报错，而是直接结束整个内核。

# %% tags=["nbval-ignore-output"]
memory = {info.device: info.total_memory for info in d2l_gpu.device_info()}
total = memory.get(str(device))
if total is None:
    print(f"PyTorch does not report how much memory {device} has.")
else:
    too_big = torch.empty(2 * total // 4, device="meta")  # float32: 4 bytes per element
    print(f"{device} has {total / 2**30:.1f} GiB; asking for {too_big.nbytes / 2**30:.1f} GiB")
    if device.type == "cpu":
        print("Not tried on the CPU: the operating system could kill the kernel instead.")
    else:
        try:
            torch.empty(too_big.shape, device=device)
        except torch.OutOfMemoryError as error:
            print("torch.OutOfMemoryError:", str(error).splitlines()[0])

# %% [markdown]
# 接下来原书在第二块 GPU 上创建一个随机张量。`try_gpu(1)` 在有第二块 GPU 时返回它，
# 否则返回 CPU，单元会说明实际是哪种情况。随机数的值取决于各设备自己的随机数生成器，
# 所以 CPU 上和 GPU 上跑出来的值不同，形状则一样。

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
# 直接相加会失败。要先把 `X` 复制到 `Y` 所在的设备，再在那里相加。
# 有两块 GPU 时，下一个单元会展示这个错误。只有一块 GPU 时，`Y` 退回到了 CPU 上，
# 于是这个单元报的是 GPU 与 CPU 混用的错误，下面的复制则是从 GPU 搬回内存。
# 没有 GPU 时，`X` 和 `Y` 都在 CPU 上，也就无从在设备之间复制。

# %% tags=["raises-exception", "nbval-ignore-output"]
if X.device == Y.device:
    print(f"X and Y are both on {X.device}: X + Y works as it is.")
else:
    X + Y

# %%
Z = X.to(Y.device)
print(X)
print(Z)

# %% [markdown]
# `X` 和 `Z` 的值相同；有两块 GPU 时，它们打印出的设备不同，分别是 `cuda:0` 和 `cuda:1`。
# 现在求和的两个操作数在同一个地方了：

# %%
print("Y + Z equals Y + 1:", torch.equal(Y + Z, Y + 1))

# %% [markdown]
# ### `.to()` 什么时候复制
#
# `Z` 已经和 `Y` 在一起。再要求把它移过去不花任何代价：`.to()` 返回的就是同一个张量对象。
# 加上 `copy=True` 时，即使设备没变，它也会分配新内存并复制每一个元素。
# 原书的 Java 接口用一个布尔参数区分这两种情况；PyTorch 里的 `Z.cuda(1)` 相当于不复制的写法。

# %%
W = Z.to(Z.device, copy=True)
print("Z.to(Z.device) is Z:", Z.to(Z.device) is Z)
print("W is Z:             ", W is Z)
print("same memory:        ", W.data_ptr() == Z.data_ptr())
print("same values:        ", torch.equal(W, Z))

# %% [markdown]
# 在 GPU 上，分配器的计数器会以字节数显示两者的差别：不复制的写法一个字节也不增加，
# 复制则增加整个张量的大小。

# %% tags=["nbval-ignore-output"]
if device.type == "cuda":
    big = torch.ones(1024, 1024, device=device)  # 4 MiB
    before = torch.cuda.memory_allocated(device)
    same = big.to(device)
    after_same = torch.cuda.memory_allocated(device)
    fresh = big.to(device, copy=True)
    after_copy = torch.cuda.memory_allocated(device)
    print(f".to(device):            +{after_same - before} bytes")
    print(f".to(device, copy=True): +{after_copy - after_same} bytes")
    del big, same, fresh
else:
    print("No CUDA GPU, so no allocator counter to read; data_ptr() above shows the same.")

# %% [markdown]
# ## 旁注，实测
#
# 人们买 GPU 是为了速度，而速度恰恰容易丢在设备之间的数据搬运上。
# 这就是 PyTorch 从不背着我们复制的原因：崩溃能指出问题所在，
# 悄悄的复制只会让程序变慢，还不告诉你为什么。有三点值得注意。
#
# - 与它所服务的运算相比，传输很慢。内存和 GPU 之间靠总线（PCIe）通信，
#   每秒只能搬几十 GB，而 GPU 读自己的显存，每秒可达 1 到数 TB。
# - 每次传输都有固定开销，与大小无关。许多次小传输远不如一次大传输，
#   同理，许多个小运算也比不上一次完成同样工作的大运算。
# - 有些操作会让 CPU 停下来等。GPU 按队列依次执行任务，Python 则继续往前跑，
#   好比打电话预订咖啡、稍后再去取。把结果读回来（`.item()`、`print`、`.numpy()`）
#   则像站在柜台前一直等到咖啡做好：这期间什么新任务也排不进队列，GPU 随后可能就闲着了。
#
# 下面的单元用 `d2l_gpu.benchmark` 来测量这些效应：它先等设备完成工作再读时钟，
# 报告时间的中位数和离散程度（四分位距 IQR）。**这些数字在这里意味着什么：**
# 本笔记本保存的输出来自一台只有 CPU 的机器，所谓"传输"只是内存里的一次复制。
# 每次调用的固定开销和 `.item()` 的代价依然看得出来，但复制并不比计算慢。
# 换到 GPU 上，同样的单元比较的是总线与 GPU，复制通常比它所服务的计算还要费时。
# 在 GPU 上运行本笔记本，就能看到你自己的数字。测量期间 PyTorch 只用一个 CPU 线程，
# 免得在一台小而忙的共享机器上，计时结果取决于第二个核多快被唤醒；GPU 自身的工作不受这个设置影响。

# %% tags=["nbval-ignore-output"]
device = d2l_gpu.try_gpu()
results = {}


def measure(label, fn):
    """Time fn on the chosen device, print the result and keep it for the plot."""
    results[label] = d2l_gpu.benchmark(
        fn, device=device, min_run_time=0.1, num_threads=1, label=label
    )
    print(results[label])


host = torch.randn(512, 512)
on_device = host.to(device)
landing = torch.empty_like(on_device)  # where each copy lands, allocated once
out = torch.empty_like(on_device)
print(f"copying 1 MiB from the host to {device}, against work done with it on {device}:")
measure("copy 1 MiB to device", lambda: landing.copy_(host))
measure("x * 2 on device", lambda: torch.mul(on_device, 2, out=out))
measure("x @ x on device", lambda: torch.matmul(on_device, on_device, out=out))

# %% [markdown]
# 每次复制都落进事先分配好的内存，每个运算也都写进现成的输出（`out=`），
# 这样时钟量到的是传输和运算本身，而不是内存分配器。逐元素的 `x * 2` 读写的内存
# 与复制搬运的一样多，矩阵乘法则对每个元素做大约一千次运算。在 GPU 上，复制多半比这两者都慢。
#
# 接着，把同样的 1 MB 拆成 256 块 4 KB 逐块复制，再与整块复制一次相比：

# %% tags=["nbval-ignore-output"]
pieces = [torch.randn(1024) for _ in range(256)]
whole = torch.cat(pieces)
landings = [torch.empty(1024, device=device) for _ in pieces]
whole_landing = torch.empty(whole.shape, device=device)
measure("256 copies of 4 KiB", lambda: [d.copy_(p) for d, p in zip(landings, pieces, strict=True)])
measure("1 copy of 1 MiB", lambda: whole_landing.copy_(whole))
ratio = results["256 copies of 4 KiB"].median / results["1 copy of 1 MiB"].median
print(f"many small copies take {ratio:.1f}x as long as one large copy of the same data")

# %% [markdown]
# 一个一个地读回数值，是同一个错误反方向的版本。训练循环里每一步都调用 `loss.item()`，
# 就会让 CPU 每一步都等 GPU 一次。下面比较用 `.item()` 逐个读取 256 个值，
# 与用一次 `.tolist()` 全部取回：

# %% tags=["nbval-ignore-output"]
values = torch.rand(256, device=device)
measure("256 x .item()", lambda: [v.item() for v in values])
measure("1 x .tolist()", lambda: values.tolist())
ratio = results["256 x .item()"].median / results["1 x .tolist()"].median
print(f".item() in a loop takes {ratio:.0f}x as long as one transfer at the end")

# %% [markdown]
# 即使在 CPU 上，循环也慢得多：每一步都要创建一个张量，再经过 PyTorch 的调度器。
# 在 GPU 上，每次 `.item()` 还要等 GPU 一次，再通过总线做一次极小的复制，差距只会更大。
#
# 下图把七个中位数并排画出，横轴取对数，误差棒表示第一到第三四分位数之间的范围。

# %% tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt

labels = list(results)
medians = [results[k].median * 1e6 for k in labels]
spread = [
    [(results[k].median - results[k].q1) * 1e6 for k in labels],
    [(results[k].q3 - results[k].median) * 1e6 for k in labels],
]
fig, ax = plt.subplots(figsize=(6, 2.6))
ax.barh(labels, medians, xerr=spread, color="tab:blue", capsize=3)
ax.set_xscale("log")
ax.set_xlabel(f"microseconds per call on {device} (median, IQR)")
ax.invert_yaxis()
fig.tight_layout()
plt.show()

# %% [markdown]
# ### 打印和 NumPy 都要经过内存
#
# `print` 和 `.numpy()` 都需要数值位于内存中，所以对 GPU 张量，它们要先把数据复制到主机。
# `.numpy()` 不会替你悄悄去做，而是要求你显式调用 `.cpu()`。
# 用 `meta` 张量，在任何机器上都能看到同样的拒绝：

# %% tags=["raises-exception"]
torch.ones(2, device="meta").numpy()

# %% [markdown]
# 对已经在 CPU 上的张量，`.cpu()` 返回它本身，`.numpy()` 与它共用内存，什么也没复制。
# 对 GPU 张量，`.cpu()` 则是一次实实在在的复制，数据写入新的主机内存。
# 下一个单元打印这里发生的是哪一种。

# %% tags=["nbval-ignore-output"]
t = torch.arange(4.0, device=device)
on_host = t.cpu()
print(f"t is on {t.device}; t.cpu() is t: {on_host is t}")
print("NumPy array shares t's memory:", on_host.numpy().ctypes.data == t.data_ptr())

# %% [markdown]
# ### 比原书多走一步：锁页内存与 `non_blocking`
#
# 从主机到 CUDA GPU 的复制由 GPU 的复制引擎完成，它只能读取锁页（pinned）内存。
# 如果数据在普通内存里，就得先经过一块锁页的中转缓冲区，CPU 还要等复制结束。
# 如果事先把内存锁页（`tensor.pin_memory()`，或在 `DataLoader` 里设 `pin_memory=True`），
# 复制就能直接走总线；再加上 `non_blocking=True`，复制只是排进队列，
# Python 可以在数据传输的同时继续干活。之后在 GPU 上的运算会自动等它完成；
# 读时钟之前则必须先同步，`d2l_gpu.benchmark` 会替你做。锁页内存需要 CUDA（或类似的）GPU；
# 没有的话，PyTorch 会直说。

# %% tags=["nbval-ignore-output"]
batch = torch.randn(2048, 1024)  # 8 MiB
try:
    pinned = batch.pin_memory()
except RuntimeError as error:
    print("pin_memory() is not available here:", error)
else:
    landing = torch.empty(batch.shape, device=device)
    print(f"copying 8 MiB to {device}:")
    measure("from ordinary memory", lambda: landing.copy_(batch))
    measure("from pinned memory", lambda: landing.copy_(pinned, non_blocking=True))

# %% [markdown]
# 在 CUDA GPU 上，从锁页内存复制通常更快；它真正的好处在于，
# 当前这批数据还在路上时，CPU 就可以着手准备下一批。
#
# 下一篇：[04 – 神经网络与 GPU](04-neural-networks-and-gpus.ipynb)，
# 把整个模型放到设备上。
