# %% [markdown]
# # 异步与传输：怎样给 GPU 计时，搬运数据要付出什么
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/05-asynchrony-and-transfers.ipynb)
#
# 在 NVIDIA H200 上运行的结果：[输出](../gpu/nvidia-h200/zh/05-asynchrony-and-transfers.ipynb)（较早版本）。
#
# **你将学到**
#
# - GPU 在 Python 背后异步工作，所以时钟必须等它：同步后的时钟与 CUDA 事件；
# - 搬运数据的代价，用这样的时钟实测；
# - 锁页内存与 `non_blocking`：它们能加快什么、会带来什么竞争，以及 `DataLoader` 交出的锁页内存中的批次。
#
# **你需要**
#
# - 先读过 [03 – 张量与 GPU](03-tensors-and-gpus.ipynb)，本课测量的正是它的旁注；
#   上一课 [04 – GPU 显存](04-gpu-memory.ipynb) 则不是必需的。
#   GPU 不是必需的：没有 GPU 时，每个单元格都在 CPU 上运行，文字会说明 GPU 上会看到什么。
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
# ## GPU 在 Python 背后工作
#
# Python 对 GPU 张量调用 `torch.matmul` 时，PyTorch 检查参数，把一个*核函数*
# （在 GPU 上运行的程序）放进 GPU 的队列，然后立即返回。
# Python 继续往前跑，GPU 则按队列依次干活，好比打电话预订咖啡、稍后再去取。
# 结果张量马上就有了，它的值要等 GPU 做到那一步才会填进去。
#
# 这让不加同步的计时出错：量到的只是把工作*排进队列*花的时间。下面的单元格把十次矩阵乘法排进队列，
# 读两次时钟：一次在循环刚结束时，一次在 `d2l_gpu.synchronize(device)`（在 CUDA 上即
# `torch.cuda.synchronize()`）之后，它会一直等到队列清空。在 CPU 上，运算就在每次调用里完成，
# 所以两次读数一致；在 GPU 上，第一次读数远小于第二次。
#
# 本课所有计时都遵守两个习惯。PyTorch 只用一个 CPU 线程计算，
# 免得在一台小而忙的共享机器上，计时结果取决于其他线程多快被唤醒；GPU 自身的工作不受影响。
# 开始计时之前先调用几次，做预热：第一次调用要付的代价（加载 GPU 代码、准备缓冲区）不计入测量。

# %% tags=["nbval-ignore-output", "key-result"]
import time

torch.set_num_threads(1)  # the one timing policy of this lesson
device = d2l_gpu.try_gpu()
n = 256 if device.type == "cpu" else 4096  # enough to keep a GPU busy
a = torch.randn(n, n, device=device)
c = torch.empty_like(a)
for _ in range(3):  # warm-up
    torch.matmul(a, a, out=c)
d2l_gpu.synchronize(device)

start = time.perf_counter()
for _ in range(10):
    torch.matmul(a, a, out=c)
queued = time.perf_counter() - start  # Python is done: the work is queued
d2l_gpu.synchronize(device)
finished = time.perf_counter() - start  # the device is done too
print(f"10 products of {n}x{n} matrices on {device}:")
print(f"  clock read when the loop returned: {queued * 1e3:8.2f} ms")
print(f"  clock read after synchronizing:    {finished * 1e3:8.2f} ms")
if finished > 2 * queued:
    meaning = "the loop returned long before the device finished: the work was queued"
else:
    meaning = "the work was done inside each call: nothing was left in a queue"
print(f"  the second reading is {finished / queued:.1f}x the first: {meaning}")

# %% [markdown]
# CUDA GPU 还能自己计时。`torch.cuda.Event` 是放进队列的一个标记；GPU 经过两个标记之后，
# `elapsed_time` 给出两者之间以毫秒计的时间。它用的是 GPU 自己的时钟，Python 自身的开销不计在内。
# 在 GPU 上，它应当与同一段工作外面的同步主机时钟几乎一致。

# %% tags=["nbval-ignore-output"]
if device.type == "cuda":
    begin = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    # record() alone marks the current GPU's queue; name the products' queue,
    # which differs when D2L_DEVICE picks a GPU other than cuda:0.
    queue = torch.cuda.current_stream(device)
    d2l_gpu.synchronize(device)
    start = time.perf_counter()
    begin.record(queue)
    for _ in range(10):
        torch.matmul(a, a, out=c)
    end.record(queue)
    end.synchronize()  # wait until the GPU has passed the second marker
    host_ms = (time.perf_counter() - start) * 1e3
    gpu_ms = begin.elapsed_time(end)
    print(f"CUDA events:           10 products took {gpu_ms:.2f} ms on the GPU's clock")
    print(f"synchronized host clock around the same work: {host_ms:.2f} ms")
    print(f"events / host clock = {gpu_ms / host_ms:.3f}")
else:
    print(f"CUDA events need a CUDA GPU; on {device} the synchronized clock above is the answer.")

# %% [markdown]
# 同一个队列也解释了一类令人困惑的报错。当某个核函数出错，比如 GPU 里下标越界，
# Python 通常早已往前走了，错误会在后面某个需要等待 GPU 的地方（一次 `print`、一次 `.item()`）
# 才冒出来，离出错的真正位置很远。在 Python 启动之前设置环境变量 `CUDA_LAUNCH_BLOCKING=1`，
# 每次启动核函数都会等它执行完，报错就会指向真正出错的那一行。它会让一切变慢：
# 只在查找错误时使用，不要用来训练。
#
# 只读一次时钟，噪声很大，所以下面的单元格把计时交给两个辅助函数。`d2l_gpu.benchmark`
# 给一个调用计时：先预热，再决定多少次调用组成一个*块*，让读时钟的开销相对于整块很小；
# 每次读时钟之前都先同步设备；最后报告每次调用时间的中位数，以及各块的四分位距（IQR）。
# `d2l_gpu.compare` 让两个调用轮流计时（第一个、第二个、第二个、第一个……），
# 机器慢下来的那一阵就会同时落在两边；它打印一条结论：两边每轮时间之比的中位数落在 1 附近的容差之内，
# 两者就算一致；只有各轮比值的中间一半都落在容差之外，才算一方明显更慢。
# `make bench` 会拿 `benchmark` 与 PyTorch 的标准测量工具 `torch.utils.benchmark.Timer` 对照，
# 并检查 `compare` 比较两个相同的调用时得出“一致”。
#
# ## 旁注，实测
#
# [03](03-tensors-and-gpus.ipynb) 提到了搬运数据的三种代价：与用到这份数据的运算相比传输很慢，
# 每次传输都有固定开销，把结果读回来会让 CPU 停下来等。下面的单元格逐一测量。
# 每次比较问的都是一方的代价是不是另一方的*好几倍*，所以都传入 `tolerance=0.5`：
# 不到 1.5 倍的差距不会改变代码的写法。**这些数字在这里意味着什么：**
# 本笔记本保存的输出来自一台只有 CPU 的机器，所谓“传输”只是内存里的一次复制。
# 每次调用的固定开销和 `.item()` 的代价依然看得出来，但复制并不比计算慢。
# 换到 GPU 上，同样的单元格比较的是总线与 GPU，复制通常比用到这份数据的运算还要费时。

# %% tags=["nbval-ignore-output", "key-result"]
results = {}  # every measurement by label, for the plot


def side_by_side(first, second, labels):
    """Compare second against first on the chosen device; print both and keep them."""
    comparison = d2l_gpu.compare(first, second, labels=labels, device=device, tolerance=0.5)
    results.update({m.label: m for m in (comparison.first, comparison.second)})
    print(comparison)
    return comparison


host = torch.randn(512, 512)
on_device = host.to(device)
landing = torch.empty_like(on_device)  # where each copy lands, allocated once
out = torch.empty_like(on_device)
print(f"copying 1 MiB from the host to {device}, against work done with it on {device}:")
side_by_side(
    lambda: torch.mul(on_device, 2, out=out),
    lambda: landing.copy_(host),
    ("x * 2 on device", "copy 1 MiB to device"),
)
side_by_side(
    lambda: torch.matmul(on_device, on_device, out=out),
    lambda: landing.copy_(host),
    ("x @ x on device", "copy 1 MiB to device"),
)

# %% [markdown]
# 每次复制都落进事先分配好的存储，每个运算也都写进现成的输出（`out=`），
# 这样时钟量到的是传输和运算本身，而不是分配器。逐元素的 `x * 2` 读写的数据量
# 与复制搬运的一样多，矩阵乘法则对每个元素做大约一千次运算。在 GPU 上，复制多半比这两者都慢。
#
# 接着，把同样的 1 MiB 拆成 256 份、每份 4 KiB，逐份复制，再与整体复制一次相比：

# %% tags=["nbval-ignore-output"]
pieces = [torch.randn(1024) for _ in range(256)]
whole = torch.cat(pieces)
landings = [torch.empty(1024, device=device) for _ in pieces]
whole_landing = torch.empty(whole.shape, device=device)
side_by_side(
    lambda: whole_landing.copy_(whole),
    lambda: [d.copy_(p) for d, p in zip(landings, pieces, strict=True)],
    ("1 x 1 MiB copy", "256 x 4 KiB copy"),
)

# %% [markdown]
# 一个一个地读回数值，是同一个错误反方向的版本。训练循环里每一步都调用 `loss.item()`，
# 就会让 CPU 每一步都等 GPU 一次。下面比较 256 次 `.item()`
# 与一次 `.tolist()`：

# %% tags=["nbval-ignore-output"]
values = torch.rand(256, device=device)
side_by_side(
    lambda: values.tolist(),
    lambda: [v.item() for v in values],
    ("1 x .tolist()", "256 x .item()"),
)

# %% [markdown]
# 在 CPU 上，循环的代价来自为每个元素创建一个张量，以及每次都要经过 PyTorch 的分发器
# （为每次调用挑选合适实现的那一层）。在 GPU 上，每次 `.item()` 还要等 GPU 一次，
# 再通过总线做一次极小的复制，差距只会更大。
#
# 下图画出这些中位数，横轴取对数，误差棒从各块的第一四分位数延伸到第三四分位数。

# %% tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt

labels = list(results)
medians = [results[k].median * 1e6 for k in labels]
spread = [
    [(results[k].median - results[k].q1) * 1e6 for k in labels],
    [(results[k].q3 - results[k].median) * 1e6 for k in labels],
]
fig, ax = plt.subplots(figsize=(6, 2.6))
ax.errorbar(medians, labels, xerr=spread, fmt="o", color="tab:blue", capsize=3)
ax.set_xscale("log")
ax.set_xlabel(f"microseconds per call on {device} (median, q1 to q3)")
ax.invert_yaxis()
ax.grid(axis="x", which="both", alpha=0.3)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 比原书多走一步：锁页内存与 `non_blocking`
#
# 从主机到 CUDA GPU 的复制由 GPU 的复制引擎完成，它只能读取锁页（pinned）内存。
# 如果数据在普通内存里，就得先经过一块锁页内存做的中转缓冲区，CPU 还要等复制结束；
# 这时要求 `non_blocking=True` 什么也得不到。如果事先把内存锁页（`tensor.pin_memory()`，
# 或在 `DataLoader` 里设 `pin_memory=True`），复制就能直接走总线；再加上 `non_blocking=True`，
# 复制只是排进队列，Python 可以在数据传输的同时继续干活。之后在 GPU 上的运算会自动等它完成；
# 读时钟之前则必须先同步，`d2l_gpu.compare` 会替你做。
# 只有 d2l_gpu 选中了 CUDA GPU，单元格才锁页；否则它不调用任何 CUDA 接口，并如实说明。

# %% tags=["nbval-ignore-output", "key-result"]
GiB = 2**30
batch = torch.randn(2048, 1024)  # 8 MiB
if device.type == "cuda":
    pinned = batch.pin_memory()
    landing = torch.empty(batch.shape, device=device)
    print(f"copying 8 MiB to {device}:")
    memories = side_by_side(
        lambda: landing.copy_(pinned, non_blocking=True),
        lambda: landing.copy_(batch),
        ("from pinned memory", "from ordinary memory"),
    )
    for m in (memories.first, memories.second):
        print(f"{m.label}: {batch.nbytes / m.median / GiB:.1f} GiB/s")
else:
    print(f"The helpers chose {device}, not a CUDA GPU: nothing pinned, no CUDA API called.")

# %% [markdown]
# 在 CUDA GPU 上，从锁页内存复制通常更快；它真正的好处在于，
# 当前这批数据还在路上时，CPU 就可以着手准备下一批。
#
# 反方向藏着一个陷阱。用 `non_blocking=True` 从 GPU 复制到主机上的锁页内存，同样只是排进队列，
# 可这回读结果的是 *CPU*，没有任何东西让 CPU 等这次复制完成。（`.to("cpu", non_blocking=True)`
# 也一样，它会替你在锁页内存中分配结果张量。）
# 下面的单元格在排入任何工作*之前*就分配好主机上的缓冲区并填上 -1，因为分配锁页内存本身就可能让 CPU 等 GPU。
# 接着排入二十次全 1 矩阵的乘法（乘积的每个元素都等于 `n`），再排入复制回主机的操作，
# 然后读取*最后*一个元素，也就是复制最后写入的那个：一次立刻读，一次在同步之后读。
# 在 CPU 上两次都对，因为没有任何东西在排队；在 CUDA GPU 上，太早的那次应当读到原来的 -1。
# 竞争也可能碰巧得出正确的结果，即复制恰好先完成了，所以太早的读取看起来正确，
# 也什么都证明不了：只有同步才能让读取安全。

# %% tags=["nbval-ignore-output", "key-result"]
pin = device.type == "cuda"  # pinned memory serves CUDA copies only
ones = torch.ones(n, n, device=device)
product = torch.empty_like(ones)
result = torch.full((n, n), -1.0, pin_memory=pin)  # the host buffer, before any work
d2l_gpu.synchronize(device)  # start from an empty queue
for _ in range(20):  # twice the work the first cell timed
    torch.matmul(ones, ones, out=product)  # every element equals n
result.copy_(product, non_blocking=True)  # on a GPU: queued behind the products
too_early = result[-1, -1].item()  # result is a CPU tensor: this does not wait
d2l_gpu.synchronize(device)
print(f"last element read before synchronizing: {too_early} (expected {float(n)}, old value -1.0)")
print(f"last element read after synchronizing:  {result[-1, -1].item()}")
if too_early != n:
    print("the early read was wrong: the copy had not landed yet")
elif device.type == "cpu":
    print("the early read was right: on the CPU nothing is queued, so there was no race")
else:
    print("the early read came out right this time: the race went the lucky way, proving nothing")

# %% [markdown]
# 设了 `pin_memory=True` 的 `DataLoader` 交出的每个批次都已在锁页内存里，可以直接用
# `non_blocking=True` 复制。下面的循环只有 d2l_gpu 选中了 CUDA GPU
# 时才要求锁页内存中的批次，并逐批检查。`num_workers=0` 让数据在本进程里加载，使例子保持简单；
# 真正的训练还会用上工作进程。

# %% tags=["nbval-ignore-output"]
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(512, 32), torch.randn(512, 1))
loader = DataLoader(data, batch_size=64, pin_memory=pin, num_workers=0)
weights = torch.zeros(32, 1, device=device)
total = torch.zeros((), device=device)
pinned_batches = 0
for features, targets in loader:
    if pin:
        pinned_batches += features.is_pinned() and targets.is_pinned()
    features = features.to(device, non_blocking=True)
    targets = targets.to(device, non_blocking=True)
    total += ((features @ weights - targets) ** 2).mean()  # queued, not waited for
if pin:
    print(f"{len(loader)} batches, {pinned_batches} of them pinned")
else:
    print(f"{len(loader)} batches in ordinary memory: the helpers chose {device}, not a CUDA GPU")
print(f"mean loss of the zero model: {total.item() / len(loader):.2f}")  # one wait, at the end

# %% [markdown]
# ## 本课小结
#
# - GPU 按队列干活，Python 则继续往前跑：读时钟之前必须先等设备完成（`d2l_gpu.synchronize`），
#   CUDA 事件用 GPU 自己的时钟给工作计时。`CUDA_LAUNCH_BLOCKING=1` 让报错指向出错的那一行。
# - `d2l_gpu.benchmark` 和 `d2l_gpu.compare` 替你这样计时；`compare` 用同一条规则、
#   在说明了的容差下判断两种代价孰轻孰重。
# - 旁注的实测：复制与运算、许多次小复制与一次大复制、循环里的 `.item()` 与一次性取回，各自都打印了结论。
# - 锁页内存让复制到 CUDA GPU 的同时 CPU 可以继续干活；不阻塞地复制回主机之后，
#   必须先同步再读取，太早的读取看起来正确也证明不了什么。`DataLoader` 可以交出锁页内存中的批次。
#
# 下一篇：[06 – 神经网络与 GPU](06-neural-networks-and-gpus.ipynb)，把整个模型放到设备上。
