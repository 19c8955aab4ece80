# %% [markdown]
# # 练习：关于 GPU 的四个问题，用测量来回答
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/07-exercises.ipynb)
#
# 这些课在 GPU 上打印的结果：[notebooks/gpu](../gpu/README.md)。
#
# **你将学到**
#
# - 矩阵乘法什么时候在 GPU 上比在 CPU 上快，什么时候反而慢；
# - 怎样保存 GPU 上的模型参数，并在任何机器上读回；
# - 数据已在 GPU 上时，每一步都调用 `.item()` 有什么代价；
# - 两块 GPU 同时计算应当带来什么。
#
# **你需要**
#
# - 本节前面的几课，尤其是
#   [04 – 异步与传输](04-asynchrony-and-transfers.ipynb)。GPU 不是必需的：每个单元格在 CPU 上都能运行。各单元格的 GPU 分支还没有在 GPU 上运行过。
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
# 每道计时题的答案都以 `d2l_gpu.compare(a, b)` 打印的一句话结束。它让两段代码分轮交替运行，然后说哪一段更慢；如果两者耗时之比在 1.25 倍以内，就说它们耗时相当。这条规则在 [09 – 给 GPU 计时](09-timing-a-gpu.ipynb) 里解释。保存的输出来自一台没有 GPU 的小型 CPU 机器。

# %%
import contextlib
import pickle
import tempfile
from pathlib import Path

from torch import nn

device = d2l_gpu.try_gpu()  # 第一块 GPU；没有 GPU 时为 CPU


@contextlib.contextmanager
def one_cpu_thread():  # 同 04：机器繁忙时，CPU 上的计时更稳定
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# %% [markdown]
# ## 练习 1：大矩阵乘法和小矩阵乘法
#
# 有 GPU 时，单元格对一个很小的 n 和一个很大的 n，分别比较同一个 n × n 乘法在 CPU 上和在 GPU 上的耗时。没有 GPU 时，它只在 CPU 上、用一个线程回答问题的后半部分：
# 48 × 48 乘法的运算量是 4 × 4 乘法的 1728 倍。

# %% tags=["nbval-ignore-output"]
def product(n, where):
    x = torch.randn(n, n, device=where)
    return lambda: x @ x


if device.type == "cpu":
    with one_cpu_thread():
        print(d2l_gpu.compare(product(4, device), product(48, device), labels=("4 x 4", "48 x 48")))
else:
    for n in (4, 2048):
        labels = (f"{n} x {n} on the CPU", f"{n} x {n} on {device}")
        print(d2l_gpu.compare(product(n, "cpu"), product(n, device), labels=labels, device=device))

# %% [markdown]
# 耗时远没有增长 1728 倍。每次调用都有固定开销：Python、PyTorch 的分发器、挑选计算例程。很小的乘法计算量太少，摊不薄这笔开销。GPU 还要再加上启动核函数的时间，所以在 4 × 4 时它比 CPU 慢。`compare` 只在每一块（一组连续的调用）结束时等待 GPU，所以慢在启动，而不在每次调用后的等待。
#
# 下图对 n 从 16 到 1024 的各种规模回答同一个问题：画出每个设备的计算速率，即 2n³ 次浮点运算除以 `benchmark` 测得的时间中位数。请留意速率怎样随 n 增长，以及曲线在哪里相交。

# %% mystnb={"image": {"alt": "\u53cc\u5bf9\u6570\u6298\u7ebf\u56fe\uff1a\u77e9\u9635\u4e58\u6cd5\u7684\u901f\u7387\uff08GFLOP/s\uff09\u968f\u77e9\u9635\u8fb9\u957f n\uff0816 \u5230 1024\uff09\u7684\u53d8\u5316\uff0c\u6bcf\u4e2a\u8bbe\u5907\u4e00\u6761\u66f2\u7ebf"}} tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt

sides = [16, 32, 64, 128, 256, 512, 1024]
fig, ax = plt.subplots(figsize=(6, 3.6), dpi=200)
for where in dict.fromkeys([d2l_gpu.cpu(), *d2l_gpu.try_all_gpus()]):  # 先是 CPU，再是各块 GPU
    seconds = [d2l_gpu.benchmark(product(n, where), device=where, min_run_time=0.05) for n in sides]
    rates = [2 * n**3 / s.median / 1e9 for n, s in zip(sides, seconds, strict=True)]
    threads = f" ({torch.get_num_threads()} threads)" if where.type == "cpu" else ""
    print(
        f"{where}{threads}: {rates[0]:.3g} GFLOP/s at n = 16, {rates[-2]:.3g} at 512,"
        f" {rates[-1]:.3g} at 1024"
    )
    ax.loglog(sides, rates, "o-", label=str(where))
ax.set_xticks(sides, [str(n) for n in sides])
ax.set_xlabel("matrix side n")
ax.set_ylabel("rate (GFLOP/s)")
ax.legend()
plt.show()
plt.close(fig)


# %% [markdown]
# n 越大，固定开销就摊到越多的运算上，所以每条曲线都随 n 上升。
# GPU 的曲线与 CPU 的曲线的交点，就是 GPU 开始胜出的规模；只有 CPU 时，图上只有一条曲线。所以要让 GPU 一次做足够大的工作。
#
# ## 练习 2：在 GPU 上读写参数
#
# 保存的是 `state_dict`，即参数张量本身，而不是 Python 对象。文件里的每个张量都记着自己所在的设备；`map_location` 让 `torch.load` 把它们放到别处。
# `weights_only=True` 只重建张量和普通容器。从 torch 2.6 起它就是默认值，我们仍然显式写出，表明代码依赖这一默认行为。它是一道防护，不是沙箱：只读取你信任的文件。

# %%
def make_net():
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 10))


net = make_net().to(device)
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "net.pt"
    torch.save(net.state_dict(), path)
    clone = make_net()  # CPU 上的模型，读取设备上保存的文件
    clone.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    pairs = zip(net.parameters(), clone.parameters(), strict=True)
    print("the CPU copy is exact:", all(torch.equal(p.cpu(), q) for p, q in pairs))
    if device.type == "cpu":  # 没有 GPU 的机器被要求把张量放到 GPU 上
        try:
            torch.load(path, map_location="cuda:0", weights_only=True)
        except RuntimeError as e:
            print(f"{type(e).__name__}: {str(e).splitlines()[0]}")
    torch.save(net, path)  # 整个对象连同它的类一起用 pickle 保存
    try:
        torch.load(path, weights_only=True)
    except pickle.UnpicklingError as e:  # 取出说明拒绝了什么的那一行
        line = next(x for x in str(e).splitlines() if "Unsupported global" in x)
        print(f"{type(e).__name__}: {line.strip().split(' was ')[0]}")


# %% [markdown]
# 第一条错误是没有 CUDA 的机器被要求把张量放到 GPU 上时打印的；更常见的情形是，这样的机器不写 `map_location` 就打开 GPU 上保存的检查点，打印的也是它。输出的最后一行说明，`weights_only=True` 拒绝重建 `Sequential` 这个类。做法是：保存 `model.state_dict()`；读取时写上 `weights_only=True` 和
# `map_location`（`"cpu"`、某个设备，或 `{"cuda:1": "cuda:0"}` 这样的映射）；再调用 `model.load_state_dict(...)`。先读到 CPU 上，还能避免大检查点在
# GPU 上占两份显存。
#
# ## 练习 3：记录 1000 次乘法结果的范数
#
# 我们计算 1000 对 n × n 矩阵的乘积，按原书取 n = 100，用两种方式记录每个乘积的弗罗贝尼乌斯（Frobenius）范数。**(a)** 每次乘法后调用 `.item()`。
# **(b)** 把每个范数写进设备上的一个张量，最后只复制到主机一次。
# (b) 每一步多做一次操作，即这次写入；它只在最后等待一次，而不是每一步都等。

# %%
def log_with_item(a, b):  # (a)
    return [torch.linalg.matrix_norm(a[i] @ b[i]).item() for i in range(len(a))]


def log_on_device(a, b):  # (b)
    log = torch.empty(len(a), device=device)
    for i in range(len(a)):
        log[i] = torch.linalg.matrix_norm(a[i] @ b[i])
    return log.cpu()


def log_batched(a, b):  # (c)
    return torch.linalg.matrix_norm(a @ b).cpu()


a, b = torch.randn(2, 1000, 100, 100, device=device)
with one_cpu_thread():
    same = torch.equal(torch.tensor(log_with_item(a, b)), log_on_device(a, b))
    print("(a) and (b) log the same numbers:", same)
    print("(c) logs them too, to rounding:", torch.allclose(log_batched(a, b), log_on_device(a, b)))

# %% [markdown]
# 等待的代价在 [04](04-asynchrony-and-transfers.ipynb) 里讲过：一步的 GPU 工作必须等它的主机工作做完时，代价最大。这里的矩阵已经在设备上。在 CPU 上没有什么可等，(a) 和 (b) 应当耗时相当。在 GPU 上，按原书取 n = 100 时瓶颈在主机：一步里启动核函数的时间比计算还长，两种写法里 GPU 都在空等；(a) 还给每个很短的步骤加上一次往返，这可能占去一步的很大一部分。对策是减少启动：**(c)** 用一次批量矩阵乘法算完全部 1000 对矩阵（[12 – 对策](12-remedies.ipynb)），在 GPU 上应当比两种循环都快许多倍。CPU 不启动核函数，所以在 CPU 上 (c) 省不了多少，甚至可能更慢。

# %% tags=["nbval-ignore-output"]
with one_cpu_thread():
    print(d2l_gpu.compare(
        lambda: log_with_item(a, b),
        lambda: log_on_device(a, b),
        labels=("(a) .item() each step, n = 100", "(b) log on the device"),
        device=device,
    ))
    print(d2l_gpu.compare(
        lambda: log_on_device(a, b),
        lambda: log_batched(a, b),
        labels=("(b) log on the device, n = 100", "(c) one batched product"),
        device=device,
    ))

# %% [markdown]
# 在 CUDA GPU 上，下一个单元格逐步增大 n，直到一步的 GPU 时间达到主机时间的五倍（`d2l_gpu.host_and_device_seconds` 测量 (b) 的一步），再在这个 n 上比较 (a) 和 (b)，1000 次乘法轮流取自十对矩阵。

# %% tags=["nbval-ignore-output"]
if device.type == "cuda":
    for k in range(16):  # n 从 100 起增大，每次运算量翻一番
        n = round(100 * 2 ** (k / 3))
        x, y = torch.randn(2, n, n, device=device)
        log = torch.empty(1, device=device)

        def step(x=x, y=y, log=log):  # (b) 的一步
            log[0] = torch.linalg.matrix_norm(x @ y)

        host, gpu = d2l_gpu.host_and_device_seconds(step, device)
        if gpu > 5 * host:  # 瓶颈已经在 GPU 上
            break
    print(f"n = {n}: per step, host {host * 1e6:.0f} us, GPU {gpu * 1e6:.0f} us")
    pairs = torch.randn(2, 10, n, n, device=device)
    a, b = ([pairs[j, i % 10] for i in range(1000)] for j in (0, 1))
    print(d2l_gpu.compare(
        lambda: log_with_item(a, b),
        lambda: log_on_device(a, b),
        labels=(f"(a) .item() each step, n = {n}", f"(b) log on the device, n = {n}"),
        device=device,
    ))
else:
    print(f"{device} is not a CUDA GPU: nothing is sized; the cell above is its answer")

# %% [markdown]
# 在这个规模下，两种写法里 GPU 都一直忙碌，(a) 每步只多一次往返和一次启动：预计两者耗时相当。无论瓶颈在哪里，把记录留在设备上、成批搬回主机，都是稳妥的习惯。
#
# ## 练习 4：在两块 GPU 上同时做两次乘法
#
# 启动核函数会立即返回，所以一个 Python 线程就能让两块 GPU 同时忙碌。每块 GPU 上各做一次大矩阵乘法、再等两者做完，耗时应当约为在一块 GPU 上先后做这两次的一半。只有两块 GPU 才能显示这一点：如果改用一块 GPU 上的两个 CUDA 流，或者两个 CPU 线程，测到的将是另一回事。

# %% tags=["nbval-ignore-output"]
gpus = [d for d in d2l_gpu.try_all_gpus() if d.type != "cpu"]
if len(gpus) >= 2:
    x = torch.randn(4096, 4096, device=gpus[0])
    y = torch.randn(4096, 4096, device=gpus[1])
    y0 = y.to(gpus[0])

    def in_turn():  # 两次乘法都在第一块 GPU 上
        x @ x
        y0 @ y0
        d2l_gpu.synchronize(gpus[0])

    def at_once():  # 每块 GPU 一次乘法；每次启动都立即返回
        x @ x
        y @ y
        d2l_gpu.synchronize(gpus[0])
        d2l_gpu.synchronize(gpus[1])

    print(
        d2l_gpu.compare(in_turn, at_once, labels=(f"both on {gpus[0]}", "one on each of two GPUs"))
    )
else:
    print(
        f"{len(gpus)} GPU(s): nothing timed; with two, one on each should take about half as long."
    )

# %% [markdown]
# 原书提示说加速应当接近线性。像这里这样，两块 GPU 共用的只有 Python
# 启动两个核函数这一步时，这个提示成立。真实的训练还要在 GPU 之间搬运数据，
# [13 – 走出单机](13-beyond-one-machine.ipynb) 开始测量这部分耗时。

# %% [markdown]
# ## 本课小结
#
# - 大矩阵乘法 GPU 快；很小的乘法 GPU 慢，因为计算量太少，摊不薄每次调用的固定开销。
# - 保存 `state_dict`，读取时写上 `weights_only=True` 和 `map_location`，
#   GPU 上保存的检查点就能在任何机器上打开。
# - 瓶颈在 GPU 上时（如练习 3 中较大的 n），每步调用 `.item()` 代价很小；步骤很短、瓶颈在主机上时（原书的 n = 100），它给每一步加上一次往返，而一次批量矩阵乘法能省掉这些启动（[12](12-remedies.ipynb)）。把数值留在设备上，一次搬回。
# - 两块 GPU 能同时做两次乘法；一块 GPU 显示不出这一点。
#
# 下一课：[08 – GPU 显存](08-gpu-memory.ipynb)，拓展内容：PyTorch 怎样管理显存，显存耗尽时是什么样子。
