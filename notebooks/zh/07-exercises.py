# %% [markdown]
# # 练习：关于 GPU 的四个问题，用测量来回答
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/08-exercises.ipynb)
#
# 在 NVIDIA H200 上运行的结果：[输出](../gpu/nvidia-h200/zh/08-exercises.ipynb)（较早版本）。
#
# **你将学到**
#
# - 矩阵乘法的耗时怎样随规模增长，在 CPU 上和在 GPU 上各是什么样，
#   为什么很小的乘法用 GPU 得不到任何好处；
# - 怎样在 GPU 上保存模型参数，并安全地在任何机器上读回；
# - 循环里的 `.item()` 到底贵在哪里，怎样记录数值而不付这笔代价；
# - 在两个设备上同时做两次乘法能省多少时间，只有一个设备时实验能说明什么。
#
# **你需要**
#
# - 本节前面的笔记本，尤其是 [03 – 张量与 GPU](03-tensors-and-gpus.ipynb)；
#   GPU 不是必需的：每个单元格在 CPU 上也能运行。
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
# 每道题的答案是几个普通 PyTorch 单元格，可以改动后重跑。`d2l_gpu` 先等设备做完再读时钟，
# 并把调用分块反复计时：`Measurement` 里是每次调用时间的中位数 `median`
# 和各块的四分位数 `q1`、`q3`（图中的误差棒）。`d2l_gpu.compare(first, second)`
# 让两段代码分轮交替运行（默认十轮）；若各轮比值的中位数与 1 的差距在容差之内（默认 10 %），
# 结论 `verdict` 就说两者相同，只有各轮比值的中间一半都落在这个范围之外才说有差别。
#
# 保存的输出来自一台只有两个核心、没有 GPU 的小型共享 CPU 机器；你的数字会不同。

# %%
import functools
import math
import os
import pickle
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
from torch import nn

device = d2l_gpu.try_gpu()  # the first GPU, else the CPU


def error_bars(measurements):
    """The distances from each median down to q1 and up to q3, as plt.errorbar wants them."""
    return [[m.median - m.q1 for m in measurements], [m.q3 - m.median for m in measurements]]


# %% [markdown]
# ## 练习 1：大矩阵乘法和小矩阵乘法
#
# 我们对一系列 n 计时一次 n x n 的 float32 矩阵乘法，在 CPU 上测，有 GPU
# 也在 GPU 上测，两者在 `d2l_gpu.compare` 里交替。n = 4 就是
# “计算量很小的任务”：只有 128 次乘法和加法。一次乘法约需 2n³ 次浮点运算，
# 除以中位数就得到以 GFLOP/s 计的速率。

# %% tags=["nbval-ignore-output"]
sizes = [4, 16, 64, 256, 512] if device.type == "cpu" else [4, 16, 64, 256, 1024, 2048]
targets = [d2l_gpu.cpu()] if device.type == "cpu" else [d2l_gpu.cpu(), device]
times, verdicts = {}, []
for n in sizes:
    x = [torch.randn(n, n, device=target) for target in targets]
    if len(targets) == 1:
        times[targets[0], n] = d2l_gpu.benchmark(torch.mm, x[0], x[0], min_run_time=0.05)
        continue
    cmp = d2l_gpu.compare(
        functools.partial(torch.mm, x[0], x[0]),
        functools.partial(torch.mm, x[1], x[1]),
        labels=(f"cpu at n = {n}", f"{targets[1]} at n = {n}"),
        device=targets[1],
        min_run_time=0.2,
    )
    times[targets[0], n], times[targets[1], n] = cmp.first, cmp.second
    verdicts.append(cmp.verdict)

print(f"{'device':>8} {'n':>5} {'median':>12} {'middle half (q1 to q3)':>26} {'GFLOP/s':>9}")
for (target, n), m in times.items():
    spread = f"{m.q1 * 1e6:,.1f} to {m.q3 * 1e6:,.1f} us"
    rate = 2 * n**3 / m.median / 1e9
    print(f"{target!s:>8} {n:>5} {m.median * 1e6:>9,.1f} us {spread:>26} {rate:>9.2f}")

# %% tags=["nbval-ignore-output", "key-result"]
if verdicts:
    print(*verdicts, sep="\n")
else:
    print("no GPU: nothing to compare; with one, this cell prints a verdict for each n")

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
# **怎样读这条曲线。** 在双对数坐标里，斜率为 3 意味着耗时随 n³ 增长，与运算量一致。
# 小 n 时曲线几乎是平的：每次调用的固定开销（Python、PyTorch 的分发器、
# 挑选 BLAS 例程）占了大头。GPU 还有自己的固定开销：启动核函数并等它完成，
# 所以在 4 x 4 时不比 CPU 快，往往更慢。n 很大时，GPU 成千上万个运算单元
# 都有活可干，它就会领先，通常快十倍以上；上面的结论给出你的机器上的情况。
# （NVIDIA GPU 默认用完整的 float32 做 float32 乘法，除非
# `torch.set_float32_matmul_precision("high")` 允许更快的 TF32。）
# 交给 GPU 大块的工作。

# %% [markdown]
# ## 练习 2：在 GPU 上读写参数
#
# 保存 `state_dict`（参数张量本身，而不是 Python 对象），读回时用
# `weights_only=True`：它只重建张量和普通容器。这是一道防护，不是沙箱
# （torch 2.6 之前有一个已知的绕过办法，能让精心构造的文件执行代码），
# 所以要让 torch 保持最新，只读取你信任的文件。文件记下了每个张量所在的设备；
# `map_location` 告诉 `torch.load` 改放到哪里。文件写进一个临时文件夹。

# %%
net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
original = {name: t.cpu() for name, t in net.state_dict().items()}  # to compare with

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
clone.load_state_dict(loads["map_location='cpu'"])  # a CPU model from a GPU's file
pairs = zip(net.parameters(), clone.parameters(), strict=True)
print("the CPU copy of the model is exact:", all(torch.equal(p.cpu(), q) for p, q in pairs))

# %% [markdown]
# 不指定 `map_location` 时，每个张量都回到保存时的设备，比如 `cuda:0`，
# 在没有这个设备的机器上读取就会失败。有 GPU 时，下一个单元格读到本课所用的设备上；
# 没有 GPU 时，它要求读到 `cuda:0` 来显示这个错误，
# 除非设置了 `D2L_DEVICE`（这样一问就会碰到该变量排除在外的 GPU）。
# 接着把整个模型存下来，就能看到 `weights_only=True` 防范的是什么。

# %% tags=["nbval-ignore-output"]
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "net.pt"
    torch.save(net.state_dict(), path)
    if device.type != "cpu":  # our device, never another GPU
        state = torch.load(path, map_location=device, weights_only=True)
        print(f"loaded onto {device}:", sorted({str(t.device) for t in state.values()}))
    elif os.environ.get("D2L_DEVICE"):
        print("D2L_DEVICE is set: not asking for cuda:0, which this run must leave alone")
    else:  # no GPU: CUDA's check fails before data moves
        try:
            torch.load(path, map_location="cuda:0", weights_only=True)
        except RuntimeError as error:
            print(f"{type(error).__name__}: {str(error).splitlines()[0]}")

# %%
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "whole-model.pt"
    torch.save(net, path)  # pickles the whole object
    try:
        torch.load(path, weights_only=True)
    except pickle.UnpicklingError as error:
        reason = [line.strip() for line in str(error).splitlines() if "Unsupported global" in line]
        print(f"{type(error).__name__}: {reason[0].split(' was ')[0] if reason else error}")

# %% [markdown]
# 安全的做法是：保存 `model.state_dict()`；读取时用 `weights_only=True`
# 并给出 `map_location`（`"cpu"`、某个设备，或者像 `{"cuda:1": "cuda:0"}`
# 这样的映射）；然后调用 `model.load_state_dict(...)`，再移动模型。
# 先读到 CPU 上，还能避免很大的检查点在 GPU 上占两份显存。

# %% [markdown]
# ## 练习 3：记录 1000 次乘法结果的范数
#
# 我们计算 1000 对 100 x 100 矩阵的乘积，用三种方式记录每个乘积的弗罗贝尼乌斯范数：
#
# - **(a)** 每次乘法后调用 `.item()`，存进 Python 列表；
# - **(b)** 把每个范数写进设备上的一个张量，最后只把这个张量复制到主机一次；
# - **(c)** 用一次批量乘法 `torch.bmm` 算出所有乘积，再一次算出所有范数。

# %%
a = torch.randn(1000, 100, 100, device=device)
b = torch.randn(1000, 100, 100, device=device)


def log_with_item(a=a, b=b):  # (a)
    return [torch.linalg.matrix_norm(a[i] @ b[i]).item() for i in range(len(a))]


def log_on_device(a=a, b=b):  # (b)
    log = torch.empty(len(a), device=device)
    for i in range(len(a)):
        log[i] = torch.linalg.matrix_norm(a[i] @ b[i])
    return log.cpu()


def log_batched(a=a, b=b):  # (c)
    return torch.linalg.matrix_norm(torch.bmm(a, b)).cpu()


# %% [markdown]
# 三种方式记录的数字必须相同：(b) 与 (a) 的运算完全一样；(c) 的批量乘法
# 可能以另一种顺序做加法，只在舍入误差内一致。然后在一个 CPU 线程上把 (b) 和 (c)
# 分别与 (a) 比较计时。(b) 与 (a) 只在何时等待上不同，用[第 07 课](07-summary.ipynb)的
# 25 % 范围，因为共享机器上的噪声就可能接近通常的 10 %。(c) 用 50 %：在 GPU 上批量计算应当快十倍以上，
# 在 CPU 上得失较小，并且取决于机器。

# %%
norms_a = torch.tensor(log_with_item())
norms_b, norms_c = log_on_device(), log_batched()
print("norms logged:", len(norms_a), len(norms_b), len(norms_c))
print("(b) equals (a) exactly:", torch.equal(norms_b, norms_a))
print("(c) equals (a) to 1e-4 (relative):", torch.allclose(norms_c, norms_a, rtol=1e-4))

# %% tags=["nbval-ignore-output", "key-result"]
against_a = [  # (b), (c) against (a), warmed up above
    d2l_gpu.compare(
        log_with_item,
        fn,
        labels=("(a) .item() each step", label),
        device=device,
        rounds=20,
        warmup=1,
        num_threads=1,
        tolerance=tolerance,
    )
    for fn, label, tolerance in (
        (log_on_device, "(b) log on the device", 0.25),
        (log_batched, "(c) one batched product", 0.5),
    )
]
logging = {m.label: m for m in (against_a[0].first, *(cmp.second for cmp in against_a))}
for name, m in logging.items():
    print(f"{name:<24} {m.median * 1e3:8.2f} ms  (q1 to q3: {m.q1 * 1e3:.2f} to {m.q3 * 1e3:.2f})")
print(*(cmp.verdict for cmp in against_a), sep="\n")

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
# **在 CPU 上。** 操作在调用返回时就已完成，所以 `.item()` 读的是已在内存里的数：
# 无需等待，(a) 和每步多做一次 PyTorch 操作的 (b) 应当相同。
# (c) 只付一次而不是 3000 次调用开销，但要把 1000 个乘积全部写进内存，
# 而循环的写法让每个小乘积一直留在缓存里。
#
# **在 GPU 上。** 一次调用只是把核函数*排进队列*就返回，所以在 (b) 中 Python 跑在 GPU 前面，
# 最后的复制是唯一的等待。在 (a) 中，每次 `.item()`
# 都要等乘法和范数算完、四个字节传回主机。等待期间 PyTorch 会释放
# 全局解释器锁（GIL）；代价在于循环停止了排队，
# GPU 只能空等 Python 启动下一次乘法。不过 GPU 算一次 100 x 100 乘法
# 远比 Python 排队快，所以在 (b) 中 GPU 在两步之间也会空闲，
# (a) 和 (b) 很可能相同。(c) 只排几个核函数，应当遥遥领先。
#
# ## 练习 3（续）：等待在哪里有代价
#
# 每一步都要花主机时间把核函数排进队列，再花 GPU 时间执行它们。
# 在 (b) 中两者重叠，一步约花较长的那个；在 (a) 中两者轮流，
# 一步花两者之和再加一次往返。两者相等时差距最大，接近两倍；
# 任何一方占主导时差距很小。所以在 CUDA GPU 上，下一个单元格对逐渐增大的 n
# 测量 (b) 的一步的这两个时间：主机时间用时钟测，同时让几次大矩阵乘法占住 GPU，
# 使这些步骤只是排队；GPU 时间用两个 CUDA 事件测（`d2l_gpu.host_and_device_seconds`）。
# 在两者最接近的 n 上，它再比较一次 (a) 和 (b)，用轮流取自十对 n x n 矩阵的 1000 次乘法。
# CPU 没有队列，所以不会显现新的东西。

# %% tags=["nbval-ignore-output", "key-result"]
if device.type == "cuda":
    mismatch, per_step = {}, {}  # |log(gpu / host)|
    print(f"{'n':>6} {'host per step':>14} {'GPU per step':>13}")
    for k in range(16):  # n: 100 to 3200, doubling the arithmetic
        n = round(100 * 2 ** (k / 3))
        x, y, log = (torch.randn(*shape, device=device) for shape in ((n, n), (n, n), (1,)))

        def step(x=x, y=y, log=log):  # one step of (b)
            log[0] = torch.linalg.matrix_norm(x @ y)

        host, gpu = per_step[n] = d2l_gpu.host_and_device_seconds(step, device)
        print(f"{n:>6} {host * 1e6:>11.1f} us {gpu * 1e6:>10.1f} us")
        mismatch[n] = abs(math.log(gpu / host))
        if gpu > host:  # larger n only drifts apart
            break
    n = min(mismatch, key=mismatch.get)
    pairs = torch.randn(2, 10, n, n, device=device)
    a_n, b_n = ([pairs[j, i % 10] for i in range(1000)] for j in (0, 1))
    host, gpu = per_step[n]
    print(f"n = {n} matches best: per step, host {host * 1e6:.0f} us, GPU {gpu * 1e6:.0f} us")
    print(d2l_gpu.compare(
        functools.partial(log_with_item, a_n, b_n),
        functools.partial(log_on_device, a_n, b_n),
        labels=(f"(a) at n = {n}", f"(b) at n = {n}"),
        device=device,
        tolerance=0.25,
    ))
elif device.type == "cpu":
    print("no queue on the CPU: host and device time per step are one; nothing new to time")
else:  # e.g. Apple MPS: no CUDA events
    print(f"{device}: no CUDA events to time the GPU with; nothing new to time")

# %% [markdown]
# 在两者匹配的大小上，Python 排队多久，GPU 就忙多久，只有 (b) 让两边同时工作：
# (a) 应当明显更慢，最多慢到两倍。由此得出规则：把记录留在设备上，成批搬回。

# %% [markdown]
# ## 练习 4：在两块 GPU 上同时做两次乘法
#
# 核函数启动会立即返回，所以一个 Python 线程就能让两块 GPU 同时忙起来：
# 每块 GPU 上各一次乘法，再等两者完成，所花时间应当接近在一块 GPU 上先后做这两次的一半。
# 单元格会说明它测的是哪种情况：
#
# - **两块或更多 GPU：** 就是这个实验本身，用较大的乘法；
# - **一块 CUDA GPU：** 用两个 CUDA 流，让两次乘法*有可能*并行执行：
#   这是在一个设备上的重叠，不是跨两个设备的扩展；
# - **没有 CUDA GPU**（完全没有，或只有没有可选流的 Apple MPS）：不计时。
#   两个 CPU 线程测的是与其他程序共享的 CPU 核心，而不是设备，结论会随负载而变。

# %%
gpus = [d for d in d2l_gpu.try_all_gpus() if d.type != "cpu"]
if len(gpus) >= 2:
    setting = f"two GPUs ({gpus[0]}, {gpus[1]})"
    x, y = torch.randn(4096, 4096, device=gpus[0]), torch.randn(4096, 4096, device=gpus[1])
    x2 = y.to(gpus[0])

    def in_sequence():  # both on the first GPU
        x @ x
        x2 @ x2
        d2l_gpu.synchronize(gpus[0])

    def at_once():  # one per GPU; launches do not wait
        x @ x
        y @ y
        d2l_gpu.synchronize(gpus[0])
        d2l_gpu.synchronize(gpus[1])

elif gpus and gpus[0].type == "cuda":
    setting = f"one GPU ({gpus[0]}), two CUDA streams"
    x, y = torch.randn(4096, 4096, device=gpus[0]), torch.randn(4096, 4096, device=gpus[0])
    streams = [torch.cuda.Stream(gpus[0]), torch.cuda.Stream(gpus[0])]

    def in_sequence():  # both on the default stream, in turn
        x @ x
        y @ y
        d2l_gpu.synchronize(gpus[0])

    def at_once():  # one product per stream; may overlap
        # on exit, torch.cuda.stream() restores our GPU, not cuda:0
        with torch.cuda.device(gpus[0]):
            for stream, m in zip(streams, (x, y), strict=True):
                stream.wait_stream(torch.cuda.current_stream())  # x and y are ready
                with torch.cuda.stream(stream):
                    m @ m
        d2l_gpu.synchronize(gpus[0])

else:
    setting = None  # no CUDA GPU: nothing to run side by side

# %% tags=["nbval-ignore-output", "key-result"]
if setting is None:
    print(f"no CUDA GPU ({device}): nothing to run at once on two devices, so nothing is timed")
else:
    # each function waits for its devices itself
    cmp = d2l_gpu.compare(
        in_sequence,
        at_once,
        labels=("one after the other", "at the same time"),
        device="cpu",
        rounds=20,
        min_run_time=0.3,
    )
    print(setting)
    print(cmp)
    print(f"speed-up: {1 / cmp.ratio:.2f}x (ideal with two devices: 2)")

# %% tags=["nbval-ignore-output"]
if setting is not None:
    pair = [cmp.first, cmp.second]
    fig, ax = plt.subplots(figsize=(7, 2.5))
    bars_ms = [[e * 1e3 for e in side] for side in error_bars(pair)]
    ax.barh([m.label for m in pair], [m.median * 1e3 for m in pair], xerr=bars_ms, capsize=4)
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds for two products (linear scale)")
    ax.set_title(f"{setting}\nmedian; bars: q1 to q3", fontsize="medium")
    plt.show()

# %% [markdown]
# 有两块 GPU 时，预期加速比接近 2：唯一共享的工作是 Python 启动两个核函数。
# 只有一块 GPU、用两个流时，预期没有收益，结论为“agree”：两个流共享同一批运算单元，
# 而一次大乘法已经让它们很忙了。

# %% [markdown]
# ## 本课小结
#
# - GPU 在大乘法上占优，在很小的乘法上吃亏：无论大小，每次调用都要付启动开销，
#   读取结果还要等待。
# - 保存 `state_dict`，读取时用 `weights_only=True` 和 `map_location`，
#   在 GPU 上保存的检查点就能在任何地方打开。
# - 循环里的 `.item()` 在 CPU 上代价很小；在 GPU 上，它让循环每一步都停止排队，
#   一步的主机时间和 GPU 时间相等时代价最大。把数值留在设备上，一次搬回。
# - 两块 GPU 可以同时做两次乘法；一块 GPU 上的两个流是另一种实验，输出如实标明。
#
# 下一篇：[09 – 走出一台机器](09-beyond-one-machine.ipynb)，每个设备一个进程，
# 并把它们的张量加起来。
