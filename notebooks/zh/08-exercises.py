# %% [markdown]
# # 练习：关于 GPU 的四个问题，用测量来回答
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/08-exercises.ipynb)
#
# **你将学到**
#
# - 矩阵乘法的耗时怎样随规模增长，在 CPU 上和在 GPU 上各是什么样，
#   为什么很小的乘法用 GPU 得不到任何好处；
# - 怎样在 GPU 上保存模型参数，并安全地在任何机器上读回；
# - 循环里的 `.item()` 到底贵在哪里，怎样记录数值而不付这笔代价；
# - 在两个设备上同时做两次乘法能省多少时间，只有一个设备或只有 CPU 时，
#   实验能说明什么、不能说明什么。
#
# **你需要**
#
# - 本节前面的笔记本，尤其是 [03 – 张量与 GPU](03-tensors-and-gpus.ipynb)；
#   GPU 不是必需的：每个单元格在 CPU 上都能运行，并说明它在那里测到的是什么。
#
# 代码和输出与英文版相同，所以单元格打印的文字是英文。

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
# 书中没有给出这些练习的答案；这里每道题的答案就是几个普通 PyTorch 代码单元格，
# 你可以改动后重新运行。所有时间都来自
# `d2l_gpu.benchmark(fn, *args, device=...)`：它先等设备做完再读时钟，先预热，
# 再分成若干块反复调用 `fn`，返回一个 `Measurement`：其中 `median`（中位数）
# 是每次调用的典型耗时，四分位数 `q1` 和 `q3` 框住中间一半的测量块。
# 图中画的是中位数，误差棒从 `q1` 延伸到 `q3`。
#
# 你得到的数字会与保存的输出不同，这是应该的：它们描述的是你的机器。
# 保存的输出来自一台只有两个核心、没有 GPU 的小型共享 CPU 机器。

# %%
import os
import pickle
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import matplotlib.pyplot as plt
from torch import nn

device = d2l_gpu.try_gpu()  # the first GPU, or the CPU when there is none


def error_bars(measurements):
    """The distances from each median down to q1 and up to q3, as plt.errorbar wants them."""
    return [[m.median - m.q1 for m in measurements], [m.q3 - m.median for m in measurements]]


def verdict(m, base):
    """Is m faster or slower than base? Only when the medians differ by more than the spread."""
    if min(m.runs, base.runs) < 3:
        return f"too few runs to judge ({min(m.runs, base.runs)})"
    if abs(m.median - base.median) <= max(m.iqr, base.iqr):
        return "no difference beyond the spread (IQR)"
    return "faster" if m.median < base.median else "slower"


# %% [markdown]
# ## 练习 1：大矩阵乘法和小矩阵乘法
#
# 我们对一系列 n 计时一次 n x n 的 float32 矩阵乘法，在 CPU 上测，如果有 GPU
# 也在 GPU 上测。最小的 n = 4 就是“计算量很小的任务”：只有 128 次乘法和加法。
# 一次 n x n 乘法大约需要 2n³ 次浮点运算，所以用它除以耗时的中位数，
# 就得到以 GFLOP/s 计的运算速率。

# %% tags=["nbval-ignore-output"]
sizes = [4, 16, 64, 256, 512] if device.type == "cpu" else [4, 16, 64, 256, 1024, 2048]
targets = [d2l_gpu.cpu()] if device.type == "cpu" else [d2l_gpu.cpu(), device]
times = {}
for target in targets:
    for n in sizes:
        x = torch.randn(n, n, device=target)
        times[target, n] = d2l_gpu.benchmark(torch.mm, x, x, device=target, min_run_time=0.05)

print(f"{'device':>8} {'n':>5} {'median':>12} {'middle half (q1 to q3)':>26} {'GFLOP/s':>9}")
for (target, n), m in times.items():
    spread = f"{m.q1 * 1e6:,.1f} to {m.q3 * 1e6:,.1f} us"
    rate = 2 * n**3 / m.median / 1e9
    print(f"{target!s:>8} {n:>5} {m.median * 1e6:>9,.1f} us {spread:>26} {rate:>9.2f}")

# %% tags=["nbval-ignore-output", "key-result"]
if len(targets) == 2:
    for n in sizes:
        on_cpu, on_gpu = times[targets[0], n], times[targets[1], n]
        speed = on_cpu.median / on_gpu.median
        print(f"n = {n:>4}: {targets[1]} is {speed:,.2f}x as fast as the CPU: {verdict(on_gpu, on_cpu)}")
else:
    print("no GPU: nothing to compare; with one, this cell prints the GPU/CPU ratio for each n")

# %% tags=["nbval-ignore-output"]
fig, ax = plt.subplots(figsize=(6, 3.5))
for target in targets:
    ms = [times[target, n] for n in sizes]
    medians = [m.median for m in ms]
    ax.errorbar(sizes, medians, yerr=error_bars(ms), marker="o", capsize=3, label=str(target))
ax.set(xscale="log", yscale="log", xlabel="n (log scale)", ylabel="seconds (log scale)")
ax.set_title("One n x n product: median, bars from q1 to q3")
ax.legend()
plt.show()

# %% [markdown]
# **怎样读这条曲线。** 两条坐标轴都是对数刻度，所以斜率为 3 的直线意味着耗时
# 随 n³ 增长，与运算量一致。小 n 时曲线却几乎是平的：乘法太小，每次调用的固定
# 开销（Python、PyTorch 的分发器、挑选并调用 BLAS 例程）占了大部分时间。
# 只有 n 足够大时，算术运算才占主导，速率才接近硬件的能力。
#
# GPU 给每次调用再加上它自己的固定开销：启动一个核函数，以及为了读取结果而等待它完成。
# 对 4 x 4 的乘法，这笔开销就是全部，所以 GPU 在这里不比 CPU 快，往往还更慢。
# n 很大时，GPU 成千上万个运算单元都有活可干，它就会领先，通常领先一个数量级以上；
# 上面的表格打印的是在你的机器上测得的倍数。（在 NVIDIA GPU 上，PyTorch 默认用完整的
# float32 做 float32 乘法，除非你用 `torch.set_float32_matmul_precision("high")`
# 允许更快的 TF32 格式。）对写代码的启示是：交给 GPU 大块的工作，而不是许多小块。

# %% [markdown]
# ## 练习 2：在 GPU 上读写参数
#
# 保存 `state_dict`（参数张量本身，而不是 Python 对象），读回时用
# `weights_only=True`：它只重建张量和普通容器，拒绝其他任何 Python 对象。
# 这大大限制了一个来历不明的文件能做的事，但它是一道防护，不是沙箱：torch 2.6
# 之前就有一个已知的绕过办法，能让精心构造的文件照样执行代码。所以要让 torch
# 保持最新，并且只读取你信任的文件。文件为每个张量记下了它被保存时所在的设备；
# `map_location` 告诉 `torch.load` 改把张量放到哪里。文件写进一个临时文件夹。

# %%
net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
original = {name: t.cpu() for name, t in net.state_dict().items()}  # a copy to compare with

with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "net.pt"
    torch.save(net.state_dict(), path)
    loads = {
        "no map_location": torch.load(path, weights_only=True),
        "map_location='cpu'": torch.load(path, map_location="cpu", weights_only=True),
    }

for how, state in loads.items():
    exact = state.keys() == original.keys() and all(
        torch.equal(state[name].cpu(), t) for name, t in original.items()
    )
    where = sorted({str(t.device) for t in state.values()})
    print(f"{how:<20} tensors on {where}, every tensor exact: {exact}")

clone = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 10))
clone.load_state_dict(loads["map_location='cpu'"])  # a model on the CPU, from a GPU's file
pairs = zip(net.parameters(), clone.parameters(), strict=True)
print("the CPU copy of the model is exact:", all(torch.equal(p.cpu(), q) for p, q in pairs))

# %% [markdown]
# 不指定 `map_location` 时，每个张量都回到它原来的设备，比如 `cuda:0`；
# 在没有这个设备的机器上，这样读取会失败。有 GPU 时，下一个单元格把文件读到本课所用的
# 设备上。没有 GPU 时，它要求读到 `cuda:0`，这会执行 GPU 保存的文件会遇到的同一项检查，
# 于是显示那个错误（保存的输出来自一台没有 GPU 的机器，无法从 GPU 保存）；
# 如果设置了 `D2L_DEVICE`，它就跳过这一步，因为这样一问就会碰到该变量排除在外的 GPU。
# 再把整个模型对象（而不是它的 `state_dict`）存下来，就能看到 `weights_only=True`
# 防范的是什么。

# %% tags=["nbval-ignore-output"]
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "net.pt"
    torch.save(net.state_dict(), path)
    if device.type != "cpu":  # onto the chosen device, never onto another GPU
        state = torch.load(path, map_location=device, weights_only=True)
        print(f"loaded onto {device}:", sorted({str(t.device) for t in state.values()}))
    elif os.environ.get("D2L_DEVICE"):
        print("D2L_DEVICE is set: not asking for cuda:0, which this run must leave alone")
    else:  # the helpers found no GPU at all, so CUDA's check fails before any data moves
        try:
            torch.load(path, map_location="cuda:0", weights_only=True)
        except RuntimeError as error:
            print(f"{type(error).__name__}: {str(error).splitlines()[0]}")

# %%
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "whole-model.pt"
    torch.save(net, path)  # pickles the Python object, classes and all
    try:
        torch.load(path, weights_only=True)
    except pickle.UnpicklingError as error:
        reason = [line.strip() for line in str(error).splitlines() if "Unsupported global" in line]
        print(f"{type(error).__name__}: {reason[0].split(' was ')[0] if reason else error}")

# %% [markdown]
# 所以安全的做法是：保存 `model.state_dict()`；读取时用 `weights_only=True`
# 并给出 `map_location`（`"cpu"`、某个设备，或者像 `{"cuda:1": "cuda:0"}`
# 这样的映射）；然后调用 `model.load_state_dict(...)`，再把模型移到你想要的设备上。
# 先读到 CPU 上，还能避免一个很大的检查点在 GPU 上同时占两份显存。

# %% [markdown]
# ## 练习 3：记录 1000 次乘法结果的范数
#
# 我们计算 1000 对 100 x 100 矩阵的乘积，并记录每个乘积的 Frobenius 范数，
# 用三种方式：
#
# - **(a)** 每次乘法后调用 `.item()`，把一个 Python 浮点数追加到列表里；
# - **(b)** 把每个范数写进设备上的一个张量，最后只把这个张量复制到主机一次；
# - **(c)** 用一次批量乘法 `torch.bmm` 算出所有乘积，再一次算出所有范数。

# %%
a = torch.randn(1000, 100, 100, device=device)
b = torch.randn(1000, 100, 100, device=device)


def log_with_item():  # (a)
    return [torch.linalg.matrix_norm(a[i] @ b[i]).item() for i in range(len(a))]


def log_on_device():  # (b)
    log = torch.empty(len(a), device=device)
    for i in range(len(a)):
        log[i] = torch.linalg.matrix_norm(a[i] @ b[i])
    return log.cpu()


def log_batched():  # (c)
    return torch.linalg.matrix_norm(torch.bmm(a, b)).cpu()


# %% [markdown]
# 三种方式记录的数字必须相同。(b) 与 (a) 的运算完全一样；(c) 的批量乘法
# 可能以另一种顺序做加法，所以只在舍入误差范围内一致：

# %%
norms_a = torch.tensor(log_with_item())
norms_b, norms_c = log_on_device(), log_batched()
print("norms logged:", len(norms_a), len(norms_b), len(norms_c))
print("(b) equals (a) exactly:", torch.equal(norms_b, norms_a))
print("(c) equals (a) to 1e-4 (relative):", torch.allclose(norms_c, norms_a, rtol=1e-4))

# %% tags=["nbval-ignore-output", "key-result"]
methods = {
    "(a) .item() each step": log_with_item,
    "(b) log on the device": log_on_device,
    "(c) one batched product": log_batched,
}
logging = {  # the check above was the warm-up
    name: d2l_gpu.benchmark(fn, device=device, min_run_time=0.5, warmup=0)
    for name, fn in methods.items()
}
for name, m in logging.items():
    print(f"{name:<24} {m.median * 1e3:8.2f} ms  (q1 to q3: {m.q1 * 1e3:.2f} to {m.q3 * 1e3:.2f})")
base = logging["(a) .item() each step"]
for name, m in list(logging.items())[1:]:
    print(f"{name[:3]} takes {m.median / base.median:.2f}x the time of (a): {verdict(m, base)}")

# %% tags=["nbval-ignore-output"]
fig, ax = plt.subplots(figsize=(6, 3))
ms = list(logging.values())
bars_ms = [[e * 1e3 for e in side] for side in error_bars(ms)]
ax.barh(list(logging), [m.median * 1e3 for m in ms], xerr=bars_ms, capsize=4)
ax.invert_yaxis()
ax.set(xlabel=f"milliseconds for 1000 products on {device} (linear scale)")
ax.set_title("Median; bars: q1 to q3")
plt.show()

# %% [markdown]
# **在 CPU 上。** CPU 上的操作在调用返回时就已经完成，所以 `.item()` 只是读取一个
# 已经在内存里的数，没有什么需要等待，(a) 几乎和任何逐次循环的写法一样快。
# (b) 在这里得不到好处，反而多做事：`log[i] = ...` 在每一步多做一次 PyTorch 操作
# （选出那个位置，把值复制进去），有它自己的调用开销，而 `.item()` 只是一次普通的读取。
# (c) 只付一次而不是 3000 次调用开销，并且交给库一个足够大的批次，可以分给所有核心；
# 但它也要先把 1000 个乘积全部写进内存，再读回来求范数，而循环的写法让每个小乘积
# 一直留在缓存里。在 CPU 上哪种效应占上风取决于机器：上面的单元格打印了你机器上的比值，
# 以及每个差距是否超出了四分位距。
#
# **在 GPU 上。** 在那里，一次调用只是把核函数*排进队列*就立即返回，所以 Python 循环
# 可以跑在 GPU 前面。(b) 正是这样：循环把 3000 个核函数全部排进队列，GPU 一个接一个地
# 连续执行，最后那一次复制是唯一的等待。在 (a) 中，每次 `.item()` 都必须等乘法和范数
# 算完、那四个字节传回主机。等待期间 Python 线程并不占着什么要紧的锁（PyTorch 在等待时
# 会释放 Python 的全局解释器锁 GIL）；真正的代价是循环停止了排队新工作。结果到达时，
# GPU 已经无事可做，只能空等 Python 准备并启动下一次乘法：如此反复一千次。
# 所以在 GPU 上 (a) 应当比 (b) 慢，(c) 最快。至于慢多少，这里没有哪次运行测过：
# 两个循环都还要为启动 3000 个小核函数付出开销，这笔开销可能掩盖掉等待。
# 上面的单元格会打印你的 GPU 上的比值和结论。由此得出本节最后的那条规则：
# 把记录留在设备上，攒成大块再搬回主机。

# %% [markdown]
# ## 练习 4：在两块 GPU 上同时做两次乘法
#
# 核函数启动会立即返回，所以一个 Python 线程就能让两块 GPU 同时忙起来：
# 在每块 GPU 上各启动一次乘法，然后等两者都完成。与在一块 GPU 上先后做这两次乘法相比，
# 时间应当接近减半。这个单元格能测什么取决于机器，它会说明自己测的是哪种情况：
#
# - **两块或更多 GPU：** 就是这个实验本身，用较大的乘法；
# - **一块 CUDA GPU：** 在它上面用两个 CUDA 流，让两次乘法*有可能*并行执行。
#   一次大乘法已经能占满 GPU，所以预期收益很小；这是在一个设备上的重叠，
#   不是跨两个设备的扩展；
# - **没有 CUDA GPU**（完全没有 GPU，或只有一个 Apple MPS 设备，它没有可选的流）：
#   不可能得到 GPU 的结果。作为替身，让两个 CPU 线程各做一次乘法，
#   并限制 PyTorch 每次乘法只用一个核心，与一个线程先后做两次相比。
#   这测的是 CPU 核心，不是 GPU，输出里也这样标明。

# %%
gpus = [d for d in d2l_gpu.try_all_gpus() if d.type != "cpu"]
if len(gpus) >= 2:
    setting = f"two GPUs ({gpus[0]}, {gpus[1]})"
    x, y = torch.randn(4096, 4096, device=gpus[0]), torch.randn(4096, 4096, device=gpus[1])
    x2 = y.to(gpus[0])

    def in_sequence():  # both products on the first GPU
        x @ x
        x2 @ x2
        d2l_gpu.synchronize(gpus[0])

    def at_once():  # one product on each GPU: the second launch does not wait for the first
        x @ x
        y @ y
        d2l_gpu.synchronize(gpus[0])
        d2l_gpu.synchronize(gpus[1])

elif gpus and gpus[0].type == "cuda":
    setting = f"one GPU ({gpus[0]}), two CUDA streams"
    x, y = torch.randn(4096, 4096, device=gpus[0]), torch.randn(4096, 4096, device=gpus[0])
    streams = [torch.cuda.Stream(gpus[0]), torch.cuda.Stream(gpus[0])]

    def in_sequence():  # both products on the default stream, one after the other
        x @ x
        y @ y
        d2l_gpu.synchronize(gpus[0])

    def at_once():  # one product per stream: the GPU may overlap them
        # Leaving torch.cuda.stream() makes the device that was current on entry current
        # again (cuda:0 by default); inside torch.cuda.device(...) that is our own GPU.
        with torch.cuda.device(gpus[0]):
            for stream, m in zip(streams, (x, y), strict=True):
                stream.wait_stream(torch.cuda.current_stream())  # x and y are ready
                with torch.cuda.stream(stream):
                    m @ m
        d2l_gpu.synchronize(gpus[0])

else:
    setting = "CPU STAND-IN, NOT A GPU RESULT: two threads, one core per product"
    x, y = torch.randn(384, 384), torch.randn(384, 384)
    pool = ThreadPoolExecutor(2)

    def in_sequence():  # one thread does both
        x @ x
        y @ y

    def at_once():  # two threads, one product each (PyTorch releases the GIL in a product)
        for job in [pool.submit(torch.mm, x, x), pool.submit(torch.mm, y, y)]:
            job.result()

# %% tags=["nbval-ignore-output", "key-result"]
threads = torch.get_num_threads()
torch.set_num_threads(1)  # one core per product; no effect on GPU products
try:
    # Each function waits for its own devices, so the clock needs no device to wait for.
    pair = [d2l_gpu.benchmark(fn, device="cpu", min_run_time=0.15) for fn in (in_sequence, at_once)]
finally:
    torch.set_num_threads(threads)
print(setting)
for name, m in zip(("one after the other", "at the same time"), pair, strict=True):
    print(f"  {name:<20} {m.median * 1e3:8.3f} ms  (q1 to q3: {m.q1 * 1e3:.3f} to {m.q3 * 1e3:.3f})")
speed_up = pair[0].median / pair[1].median
print(f"  speed-up: {speed_up:.2f}x (ideal with two devices: 2); at once is {verdict(*pair[::-1])}")

# %% tags=["nbval-ignore-output"]
fig, ax = plt.subplots(figsize=(7, 2.5))
bars_ms = [[e * 1e3 for e in side] for side in error_bars(pair)]
ax.barh(["one after the other", "at the same time"], [m.median * 1e3 for m in pair],
        xerr=bars_ms, capsize=4)
ax.invert_yaxis()
ax.set_xlabel("milliseconds for two products (linear scale)")
ax.set_title(f"{setting}\nmedian; bars: q1 to q3", fontsize="medium")
plt.show()

# %% [markdown]
# 有两块 GPU 时，预期加速比接近 2：每块 GPU 做自己的乘法，唯一共享的工作是 Python
# 启动两个核函数，只需几微秒。只有一块 GPU、用两个流时，预期收益很小：两个流共享同一批
# 运算单元，而一次大乘法已经让它们很忙了。CPU 替身通常也达不到 2，原因在它自己：
# 两个核心共享内存带宽和缓存，在共享的机器上，其他程序也在争用它们。

# %% [markdown]
# ## 本课小结
#
# - GPU 在大乘法上占优，在很小的乘法上吃亏：无论大小，每次调用都要付启动的开销，
#   读取结果时还要付等待的开销。
# - 保存 `state_dict`，读取时用 `weights_only=True` 和 `map_location`，
#   在 GPU 上保存的检查点就能在任何地方打开。
# - 循环里的 `.item()` 在 CPU 上代价很小；在 GPU 上，它让循环每一步都停止排队工作。
#   把数值留在设备上，最后一次搬回。
# - 两块 GPU 可以同时做两次乘法；一块 GPU 上的多个流或 CPU 上的多个线程是不同的实验，
#   输出里也如实标明。
