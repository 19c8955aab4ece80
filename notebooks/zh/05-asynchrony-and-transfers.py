# %% [markdown]
# # 异步与传输：怎样给 GPU 计时，搬运数据要付出什么
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/05-asynchrony-and-transfers.ipynb)
#
# **你将学到**
#
# - GPU 在 Python 背后异步工作，以及怎样给它计时：同步后的时钟、CUDA 事件、
#   标准的 `torch.utils.benchmark` 和 `d2l_gpu.benchmark`，后两者会一步一步拆开来看；
# - 搬运数据的代价，用实测说话；
# - 锁页内存与 `non_blocking`：它们能加快什么、会带来什么竞争，以及 `DataLoader` 交出的锁页批量。
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
# （在 GPU 上运行的程序）放进 GPU 的队列，然后立即返回，远在 GPU 算完之前。
# Python 继续往前跑，GPU 则按队列依次干活，好比打电话预订咖啡、稍后再去取。
# 结果张量马上就有了，它的值要等 GPU 做到那一步才会填进去。
#
# 这让不加同步的计时出错：量到的只是把工作*排进队列*花的时间。下面的单元格把十次矩阵乘法排进队列，
# 读两次时钟：一次在循环刚结束时，一次在 `d2l_gpu.synchronize(device)`（在 CUDA 上即
# `torch.cuda.synchronize()`）之后，它会一直等到队列清空。在 CPU 上，运算就在每次调用里完成，
# 所以两次读数一致；在 GPU 上，第一次读数远小于第二次。
#
# 本课所有计时都遵守同一条规则：PyTorch 只用一个 CPU 线程计算（由这个单元格设定），
# 免得在一台小而忙的共享机器上，计时结果取决于其他线程多快被唤醒；GPU 自身的工作不受影响。
# 开始计时之前先调用三次，做预热：第一次调用要付的代价（加载 GPU 代码、准备缓冲区）不计入测量。

# %% tags=["nbval-ignore-output", "key-result"]
import time

torch.set_num_threads(1)  # the one timing policy of this lesson
device = d2l_gpu.try_gpu()
n = 256 if device.type == "cpu" else 4096  # big enough to keep a GPU busy for a while
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
    verdict = "the loop returned long before the device finished: the work was queued"
else:
    verdict = "the work was done inside each call: nothing was left in a queue"
print(f"  the second reading is {finished / queued:.1f}x the first: {verdict}")

# %% [markdown]
# CUDA GPU 还能自己计时。`torch.cuda.Event` 是放进队列的一个标记；GPU 经过两个标记之后，
# `elapsed_time` 给出两者之间以毫秒计的时间。它用的是 GPU 自己的时钟，Python 自身的开销不计在内。
# 单元格把它与同一段工作外面的同步主机时钟相比；在 GPU 上，两者应当几乎一致。

# %% tags=["nbval-ignore-output"]
if device.type == "cuda":
    begin = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    # Plain record() marks the current GPU's queue; name the queue the products
    # go to, which differs when D2L_DEVICE picks a GPU other than cuda:0.
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
# ## 拆开测量工具看一看
#
# 只读一次时钟，噪声很大。标准的测量工具是 PyTorch 自带的 `torch.utils.benchmark.Timer`；
# 本课用的 `d2l_gpu.benchmark` 遵循同样的做法，返回时间的中位数及其离散程度。两者都不是黑箱。
# 下面的单元格先手工一步一步地做一遍，再让两个工具测同一个调用：
#
# 1. 先调用几次做预热；
# 2. 决定多少次调用组成一个*块*，让读时钟（以及读之前等待 GPU）的开销相对于整块可以忽略
#    （手工版：把次数翻倍，直到一块持续 1 ms；`d2l_gpu.benchmark` 的目标是开销不超过 1%，
#    `Timer` 是 0.01%，块的大小每次扩大十倍）；
# 3. 一块接一块地计时，总共约 0.5 s，每次读时钟之前都先等设备完成；
# 4. 报告每次调用时间的中位数和四分位距（IQR），即中间一半的块的分布范围。
#
# `Timer` 默认的时钟等待的是*当前*加速器，如果没有另行指定就是 `cuda:0`；
# 用 `D2L_DEVICE` 限定在 CPU 或 `cuda:1` 上的运行不能碰那块卡，所以我们改用 d2l_gpu 的时钟。

# %% tags=["nbval-ignore-output"]
from torch.utils import benchmark as torch_benchmark


def work():
    torch.matmul(a, a, out=c)


def clock():
    d2l_gpu.synchronize(device)  # wait for the chosen device; nothing to wait for on a CPU
    return time.perf_counter()


def block(number):
    start = clock()
    for _ in range(number):
        work()
    return clock() - start


for _ in range(3):  # 1. warm up
    work()
number = 1  # 2. calls per block
while block(number) < 1e-3:
    number *= 2
times = []  # 3. blocks, about 0.5 s in all
while sum(times) * number < 0.5:
    times.append(block(number) / number)
by_hand = d2l_gpu.Measurement.from_times(times, number, label="by hand")  # 4. median, IQR
helpers = d2l_gpu.benchmark(work, device=device, min_run_time=0.5, label="d2l_gpu.benchmark")
timer = torch_benchmark.Timer("work()", globals={"work": work}, timer=clock)
timed = timer.blocked_autorange(min_run_time=0.5)
standard = d2l_gpu.Measurement.from_times(timed.times, timed.number_per_run, label="Timer")


def verdict(first, second):
    """The ratio of two medians, and whether the gap stands out from the spread."""
    apart = first.q1 > second.q3 or second.q1 > first.q3
    clear = "do not overlap: a clear difference" if apart else "overlap: no clear difference"
    return (
        f"{first.label} / {second.label} = {first.median / second.median:.3g}; "
        f"their q1-q3 ranges {clear}"
    )


for measurement in (by_hand, helpers, standard):
    print(measurement)
print(verdict(helpers, standard))
print(verdict(by_hand, standard))

# %% [markdown]
# `verdict` 是下面每次比较都遵守的规则：只有两次测量的中间一半（从第一到第三四分位数）
# 互不重叠，差距才算数。两者重叠时，几个工具的结果一致，那点差别只是噪声。
# `Timer` 的功能更多（`adaptive_autorange()`，以及生成对比表格的 `Compare`）；
# `d2l_gpu.benchmark` 接受普通函数，只等待 d2l_gpu 选定的设备。
#
# ## 旁注，实测
#
# [03](03-tensors-and-gpus.ipynb) 提到了搬运数据的三种代价：与用到这份数据的运算相比传输很慢，
# 每次传输都有固定开销，把结果读回来会让 CPU 停下来等。下面的单元格用 `d2l_gpu.benchmark`
# 逐一测量，并打印结论。**这些数字在这里意味着什么：**
# 本笔记本保存的输出来自一台只有 CPU 的机器，所谓“传输”只是内存里的一次复制。
# 每次调用的固定开销和 `.item()` 的代价依然看得出来，但复制并不比计算慢。
# 换到 GPU 上，同样的单元格比较的是总线与 GPU，复制通常比用到这份数据的运算还要费时。

# %% tags=["nbval-ignore-output", "key-result"]
results = {}


def measure(label, fn):
    """Time fn on the chosen device, print the result and keep it for the plot."""
    results[label] = d2l_gpu.benchmark(fn, device=device, min_run_time=0.1, label=label)
    print(results[label])


host = torch.randn(512, 512)
on_device = host.to(device)
landing = torch.empty_like(on_device)  # where each copy lands, allocated once
out = torch.empty_like(on_device)
print(f"copying 1 MiB from the host to {device}, against work done with it on {device}:")
measure("copy 1 MiB to device", lambda: landing.copy_(host))
measure("x * 2 on device", lambda: torch.mul(on_device, 2, out=out))
measure("x @ x on device", lambda: torch.matmul(on_device, on_device, out=out))
print(verdict(results["copy 1 MiB to device"], results["x * 2 on device"]))
print(verdict(results["copy 1 MiB to device"], results["x @ x on device"]))

# %% [markdown]
# 每次复制都落进事先分配好的存储，每个运算也都写进现成的输出（`out=`），
# 这样时钟量到的是传输和运算本身，而不是分配器。逐元素的 `x * 2` 读写的数据量
# 与复制搬运的一样多，矩阵乘法则对每个元素做大约一千次运算。在 GPU 上，复制多半比这两者都慢。
#
# 接着，把同样的 1 MiB 拆成 256 块 4 KiB 逐块复制，再与整块复制一次相比：

# %% tags=["nbval-ignore-output"]
pieces = [torch.randn(1024) for _ in range(256)]
whole = torch.cat(pieces)
landings = [torch.empty(1024, device=device) for _ in pieces]
whole_landing = torch.empty(whole.shape, device=device)
measure("256 copies of 4 KiB", lambda: [d.copy_(p) for d, p in zip(landings, pieces, strict=True)])
measure("1 copy of 1 MiB", lambda: whole_landing.copy_(whole))
print(verdict(results["256 copies of 4 KiB"], results["1 copy of 1 MiB"]))

# %% [markdown]
# 一个一个地读回数值，是同一个错误反方向的版本。训练循环里每一步都调用 `loss.item()`，
# 就会让 CPU 每一步都等 GPU 一次。下面比较用 `.item()` 逐个读取 256 个值，
# 与用一次 `.tolist()` 全部取回：

# %% tags=["nbval-ignore-output"]
values = torch.rand(256, device=device)
measure("256 x .item()", lambda: [v.item() for v in values])
measure("1 x .tolist()", lambda: values.tolist())
print(verdict(results["256 x .item()"], results["1 x .tolist()"]))

# %% [markdown]
# 在 CPU 上，循环的代价来自为每个元素创建一个张量，以及每次都要经过 PyTorch 的分发器
# （为每次调用挑选合适实现的那一层）。在 GPU 上，每次 `.item()` 还要等 GPU 一次，
# 再通过总线做一次极小的复制，差距只会更大。
#
# 下图把七个中位数并排画出，横轴取对数，每个中位数画成一个点，误差棒从第一四分位数延伸到第三四分位数。

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
# 如果数据在普通内存里，就得先经过一块锁页的中转缓冲区，CPU 还要等复制结束；
# 这时要求 `non_blocking=True` 什么也得不到。如果事先把内存锁页（`tensor.pin_memory()`，
# 或在 `DataLoader` 里设 `pin_memory=True`），复制就能直接走总线；再加上 `non_blocking=True`，
# 复制只是排进队列，Python 可以在数据传输的同时继续干活。之后在 GPU 上的运算会自动等它完成；
# 读时钟之前则必须先同步，`d2l_gpu.benchmark` 会替你做。锁页内存是为复制到 CUDA GPU 服务的，
# 所以只有 d2l_gpu 选中了 CUDA GPU，单元格才锁页；否则它不调用任何 CUDA 接口，并如实说明。

# %% tags=["nbval-ignore-output", "key-result"]
GiB = 2**30
batch = torch.randn(2048, 1024)  # 8 MiB
if device.type == "cuda":
    pinned = batch.pin_memory()
    landing = torch.empty(batch.shape, device=device)
    print(f"copying 8 MiB to {device}:")
    measure("from ordinary memory", lambda: landing.copy_(batch))
    measure("from pinned memory", lambda: landing.copy_(pinned, non_blocking=True))
    for label in ("from ordinary memory", "from pinned memory"):
        print(f"{label}: {batch.nbytes / results[label].median / GiB:.1f} GiB/s")
    print(verdict(results["from ordinary memory"], results["from pinned memory"]))
else:
    print(f"The helpers chose {device}, not a CUDA GPU: nothing pinned, no CUDA API called.")

# %% [markdown]
# 在 CUDA GPU 上，从锁页内存复制通常更快；它真正的好处在于，
# 当前这批数据还在路上时，CPU 就可以着手准备下一批。
#
# 反方向藏着一个陷阱。用 `non_blocking=True` 从 GPU 复制到锁页的主机内存，同样只是排进队列，
# 可这回读结果的是 *CPU*，没有任何东西让 CPU 等这次复制完成。在同步之前读取主机上的张量，
# 读到的可能是复制还没来得及填写的内存。（`.to("cpu", non_blocking=True)` 也一样，
# 它会替你分配锁页的结果张量。）下面把一个全 1 矩阵的乘法排进队列，乘积的每个元素都等于 `n`，
# 再不加等待地复制回主机；第一个元素读两次，一次读得太早，一次在同步之后。
# 在 CPU 上两次都对，因为没有任何东西在排队；在 CUDA GPU 上，太早的那次通常读到 `0.0` 或一个过时的值。

# %% tags=["nbval-ignore-output"]
ones = torch.ones(n, n, device=device)
product = ones @ ones  # every element equals n; on a GPU this is only queued
result = torch.empty(product.shape, pin_memory=device.type == "cuda")
result.copy_(product, non_blocking=True)  # on a GPU: queued behind the product
too_early = result[0, 0].item()  # result is a CPU tensor: this does not wait
d2l_gpu.synchronize(device)
print(f"read before synchronizing: {too_early} (expected {float(n)})")
print(f"read after synchronizing:  {result[0, 0].item()}")
print("the early read was", "right" if too_early == n else "wrong: the copy had not landed yet")

# %% [markdown]
# 设了 `pin_memory=True` 的 `DataLoader` 交出的每一批数据都已在锁页内存里，可以直接用
# `non_blocking=True` 复制。下面在一个小数据集上跑一个简短的循环，只有 d2l_gpu 选中了 CUDA GPU
# 时才要求锁页，并逐批检查。`num_workers=0` 让数据在本进程里加载，使例子保持简单；
# 真正的训练还会用上工作进程。

# %% tags=["nbval-ignore-output"]
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(512, 32), torch.randn(512, 1))
pin = device.type == "cuda"  # pinning serves copies to a CUDA GPU only
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
# - 认真的测量要预热、用同步后的时钟给成块的调用计时，并报告中位数及其离散程度；
#   `torch.utils.benchmark.Timer` 和 `d2l_gpu.benchmark` 都是这样做的。
#   只有两次测量从第一到第三四分位数的范围互不重叠，差距才算数。
# - 旁注的实测：复制与运算、许多次小复制与一次大复制、循环里的 `.item()` 与一次性取回，各自都打印了结论。
# - 锁页内存让复制到 CUDA GPU 的同时 CPU 可以继续干活；不阻塞地复制回主机之后，
#   必须先同步再读取；`DataLoader` 可以交出锁页的批量。
#
# 下一篇：[06 – 神经网络与 GPU](06-neural-networks-and-gpus.ipynb)，把整个模型放到设备上。
