# %% [markdown]
# # 给 GPU 计时：先等设备再读时钟，以及一条比较规则
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/09-timing-a-gpu.ipynb)
#
# 这些课在 GPU 上打印的结果：[notebooks/gpu](../gpu/README.md)。
#
# *拓展内容：本课超出了原书本节的范围。*
#
# **你将学到**
#
# - 为什么普通的时钟在 GPU 上会骗人：它量到的是启动核函数的时间，而不是计算本身；
# - `d2l_gpu.Timer`：原书的计时器，改成了读数前先等设备做完；`d2l_gpu.benchmark`：先预热，再报告时间的中位数和离散程度；
# - CUDA 事件量的是什么，包括它*并不*排除的那部分时间；
# - 各课里 `d2l_gpu.compare` 用的那一条规则，以及它的容差区间。
#
# **你需要**
#
# - 先读过 [04 – 异步与传输](04-asynchrony-and-transfers.ipynb)：那一课说明了 GPU 按队列执行工作，Python 不等它做完就继续往下执行。GPU 不是必需的：在 CPU 上每个单元格都能运行，文字会说明 GPU 上会看到什么。
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
# ## 读时钟之前先等设备：`Timer`
#
# [04](04-asynchrony-and-transfers.ipynb) 说明了：在 GPU 上，一串矩阵乘法的循环早在设备算完之前就返回了。所以循环刚结束就读时钟，量到的是*启动*这些工作用的时间，而不是做完它们用的时间。原书用一个小小的 `Timer` 类给实验计时（`start`、`stop`、`avg`、`sum`、`cumsum`），它读时钟之前不等设备，所以在 GPU 上量到的只是启动。`d2l_gpu.Timer` 保留原书的方法名，但每次读数之前都先等设备做完。
#
# 下面的单元格用两种方式给十次矩阵乘法计时，每种方式各测五次。开始计时之前先做的十次乘法是*预热*：头几次调用要付一次性的代价，后面的调用就不必再付。在 CUDA GPU 上做矩阵乘法时，这些代价是初始化 cuBLAS 库（它的句柄和工作空间），以及把核函数的代码装到卡上，即 [08](08-gpu-memory.ipynb) 讲的惰性加载。

# %% tags=["nbval-ignore-output"]
import time

device = d2l_gpu.try_gpu()
torch.set_num_threads(1)  # 和 04 一样只用一个 CPU 线程：机器忙时计时更稳定
n = 256 if device.type == "cpu" else 4096  # GPU 要有足够大的工作才能一直忙着
a = torch.randn(n, n, device=device)
c = torch.empty_like(a)


def ten_products():
    for _ in range(10):
        torch.matmul(a, a, out=c)


ten_products()  # 预热
plain, timer = [], d2l_gpu.Timer(device)
for _ in range(5):
    d2l_gpu.synchronize(device)
    start = time.perf_counter()
    ten_products()
    plain.append(time.perf_counter() - start)  # Python 已经返回，设备未必做完
    timer.start()  # 先等设备做完，再开始计时
    ten_products()
    timer.stop()  # 先等设备做完，再读时钟
print(f"10 products of {n}x{n} on {device}, five readings (ms) each way:")
for what, times in (
    ("a clock that does not wait", plain),
    ("d2l_gpu.Timer, which waits", timer.times),
):
    print(f"  {what}: {', '.join(f'{t * 1e3:.2f}' for t in times)}")
print(f"mean of the Timer readings: {timer.avg() * 1e3:.2f} ms")

# %% [markdown]
# 下图把两组读数并排画在对数坐标上：请看它们相隔多远。

# %% mystnb={"image": {"alt": "\u5bf9\u6570\u7eb5\u8f74\u7684\u6761\u5e26\u56fe\uff1a\u5341\u6b21\u77e9\u9635\u4e58\u6cd5\u7684\u8017\u65f6\uff08\u6beb\u79d2\uff09\uff0c\u5de6\u8fb9\u662f\u4e0d\u7b49\u8bbe\u5907\u5c31\u8bfb\u65f6\u949f\u7684\u4e94\u6b21\u8bfb\u6570\uff0c\u53f3\u8fb9\u662f\u5148\u7b49\u8bbe\u5907\u518d\u8bfb\u65f6\u949f\u7684 d2l_gpu.Timer \u7684\u4e94\u6b21\u8bfb\u6570\u3002\u5728 CPU \u4e0a\u4e24\u7ec4\u70b9\u91cd\u53e0\uff1b\u5728 GPU \u4e0a\u5de6\u8fb9\u4e00\u7ec4\u8fdc\u8fdc\u4f4e\u4e8e\u53f3\u8fb9\u4e00\u7ec4\u3002"}} tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt
from matplotlib import ticker

fig, ax = plt.subplots(figsize=(6, 3.6), dpi=200)
for i, times in enumerate((plain, timer.times)):
    spread = [i + 0.04 * (k - 2) for k in range(len(times))]  # 左右错开，五次读数就是五个点
    ax.plot(spread, [t * 1e3 for t in times], "o", alpha=0.5)
ax.set_xticks([0, 1], ["does not wait (perf_counter)", "waits (d2l_gpu.Timer)"])
ax.set_xlim(-0.5, 1.5)
ax.set_yscale("log")
ax.yaxis.set_major_locator(ticker.LogLocator(subs=(1, 2, 3, 5)))
ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))  # 刻度写 0.5、1、2，而不是 10 的幂
ax.yaxis.set_minor_formatter(ticker.NullFormatter())
readings = [t * 1e3 for t in plain + timer.times]
ax.set_ylim(min(readings) / 2, max(readings) * 2)  # 上下留出余量，读数一致时两组点看起来也一致
ax.set_xlabel("clock")
ax.set_ylabel("time of ten products (ms)")
ax.set_title(f"10 products of {n}x{n} on {device}", fontsize=9)
plt.show()
plt.close(fig)

# %% [markdown]
# 如果两组读数重叠（在 CPU 上就是这样），说明每次乘法在调用返回之前就已算完。如果左边一组（`does not wait`）远远低于右边一组（`waits`），就像在 GPU 上那样，说明 Python 只是把工作排进了队列：不等设备就读时钟，量到的只是启动。
#
# ## `benchmark()`：预热、分块、中位数与离散程度
#
# `Timer` 的五次读数各不相同。一次读数可能恰好碰上别的程序占着 CPU，或者 GPU 还在提升时钟频率。`d2l_gpu.benchmark` 建立在 PyTorch 自带的测量工具 `torch.utils.benchmark.Timer` 之上，把细心的人手动计时时会做的几件事自动完成了：
#
# - 先调用几次（预热）；
# - 把若干次调用归成一个*块*，块要足够大，让读时钟的开销相对于整块可以忽略；每块的两端都先等设备做完；
# - 至少计时 10 块，报告每次调用时间的**中位数**（一块慢了也拉不动它），以及**四分位距**（IQR）：中间一半的块的时间范围，从第一四分位数（q1）到第三四分位数（q3）。

# %% tags=["nbval-ignore-output"]
product = d2l_gpu.benchmark(lambda: torch.matmul(a, a, out=c), device=device, label="x @ x")
print(product)
print(f"middle half of the blocks: {product.q1 * 1e3:.3f} to {product.q3 * 1e3:.3f} ms per call")
blocks = product.times
print(
    f"{len(blocks)} blocks: mean {sum(blocks) / len(blocks) * 1e3:.3f} ms per call,"
    f" the slowest {max(blocks) * 1e3:.3f} ms"
)

# %% [markdown]
# 中位数旁边打印了各块的平均值。如果有一块比其余的慢好几倍（别的程序占着 CPU，或者 Python 停下来回收垃圾），平均值会被它拉高，中位数却几乎不动：这就是各课报告中位数的原因。
#
# ## CUDA 事件：GPU 自己的时间线
#
# CUDA GPU 也能给自己计时。`torch.cuda.Event` 是放进队列的一个标记；GPU 走到它时记下当时的时刻。`elapsed_time` 给出两个标记之间*在 GPU 时间线上*相隔的毫秒数。人们很容易把它理解成“去掉了 Python 开销的 GPU 时间”，但它并不是：如果 GPU 在两个标记之间闲着，等 Python 启动下一个核函数，这段空闲也算在里面。
#
# 下面的单元格用 200 个极小的核函数（`small.mul_(1.0)`，每个都比启动它的时间短得多）演示两种情况：
#
# - *第一个标记时 GPU 空闲*：Python 每启动一个核函数，GPU 就马上算完，然后等下一个。事件读到的时间与同步后的主机时钟差不多，都是启动循环所花的时间。
# - *GPU 先忙起来*：第一个标记之前先排进三次大的矩阵乘法，GPU 走到这个标记时，200 次启动都已经在队列里了。这时事件量到的是这些核函数一个接一个、中间没有空隙地运行的时间，要短得多。
#
# 像第一行那样围绕大的矩阵乘法计时，事件与同步后读取的主机时钟几乎一致，因为 GPU 始终没有空闲。这个单元格还没有在 GPU 上运行过。

# %% tags=["nbval-ignore-output", "key-result"]
if device.type == "cuda":
    stream = torch.cuda.current_stream(device)  # 核函数进入的队列
    small = torch.ones(256, device=device)

    def timed_on_gpu(work, head_start):
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        d2l_gpu.synchronize(device)
        for _ in range(head_start):
            torch.matmul(a, a, out=c)  # Python 启动核函数时，GPU 正忙于这些乘法
        start = time.perf_counter()
        begin.record(stream)
        work()
        end.record(stream)
        end.synchronize()  # 等 GPU 走过第二个标记
        return begin.elapsed_time(end), (time.perf_counter() - start) * 1e3

    def tiny_kernels():
        for _ in range(200):
            small.mul_(1.0)

    for what, work, head_start in (
        ("10 large products, GPU idle at start", ten_products, 0),
        ("200 tiny kernels, GPU idle at start", tiny_kernels, 0),
        ("200 tiny kernels, GPU busy first", tiny_kernels, 3),
    ):
        timed_on_gpu(work, head_start)  # 预热
        gpu_ms, host_ms = timed_on_gpu(work, head_start)
        print(f"{what}: events {gpu_ms:.3f} ms, host clock {host_ms:.3f} ms")
else:
    print(f"CUDA events need a CUDA GPU; on {device} nothing is queued, and a clock that")
    print("waits (Timer, benchmark) measures the work itself.")

# %% [markdown]
# 在最后一行，主机读时钟之前还要等那三次乘法做完，所以主机时钟的读数更大；事件只覆盖那些小核函数。可见只有队列一直排满时，事件量到的才只是计算本身。`d2l_gpu.benchmark` 和 `compare` 则先等设备做完，再读主机时钟，这样量到的是用户真正要等的一切：启动、空闲和计算。
#
# ## `compare()`：判断“哪个更慢”的一条规则
#
# 先后测出的两个中位数可能不同，只因为中间机器变忙了。`d2l_gpu.compare(first, second)` 避开了这一点：它让两者按*轮*交替计时（先第一个后第二个，再先第二个后第一个，依此类推，共 10 轮），每轮各计一块，并算出每轮的比值 second / first。机器变慢的那段时间会同时影响同一轮里的两次测量，在这一轮的比值里大体抵消。
#
# 然后套用一条规则，只有一个*容差区间*：**1.25** 倍。单元格打印的结论是英文：
#
# - 各轮比值的中位数落在 1/1.25（0.8）到 1.25 之间，两者就**耗时相当**，输出写作 `A and B took about as long (within 1.25x)`；
# - 只有各轮比值的中间一半（q1 到 q3）都落在区间之外，才说一方**明显**更慢（或更快），输出写作 `B took Nx as long as A`，即 B 的耗时是 A 的 N 倍；
# - 介于两者之间的情况，就是**没有明显差别**，输出写作 `no clear difference between A and B`。
#
# 后两种结论的句末写着 `in all 10 rounds` 或 `in 6 of 10 rounds`，数的是比值超出容差区间的轮数：10 轮全部超出，或 10 轮中有 6 轮超出。其他常见输出的意思见[术语表](README.md#代码和输出)。
#
# 用倍数而不用百分比，是因为结论不该取决于哪一方放在前面：这一方向的“耗时是 1.25 倍”，反过来就是“0.8 倍”。取 1.25，是因为更小的差距很少会改变代码的写法，而在共享的机器上，计时的漂移往往不止百分之几。各课都用这个默认的容差区间，并打印 `compare` 返回的那句话；只有本课讨论它。
#
# 下面的单元格先比较 `x * 2` 与 `x + x`（读写的数据量一样多，应当耗时相当），再比较 `x * 2` 与在四倍数据上做的 `x * 2`，后者应当明显更慢。每句话下面都打印各轮比值的中位数和中间一半，旁边是容差区间。

# %% tags=["nbval-ignore-output"]
x = torch.randn(2**22, device=device)  # 16 MiB 的 float32 数据
y = torch.empty_like(x)
big = torch.randn(2**24, device=device)  # 四倍的数据
big_out = torch.empty_like(big)


def times_two():
    torch.mul(x, 2, out=y)


def plus_itself():
    torch.add(x, x, out=y)


def times_two_big():
    torch.mul(big, 2, out=big_out)


for first, second, labels in (
    (times_two, plus_itself, ("x * 2", "x + x")),
    (times_two, times_two_big, ("x * 2", "x * 2 on 4x the data")),
):
    comparison = d2l_gpu.compare(first, second, labels=labels, device=device)
    print(comparison)
    low, high = 1 / comparison.band, comparison.band
    print(
        f"  round ratios: median {comparison.ratio:.2f}, middle half"
        f" {comparison.ratio_q1:.2f} to {comparison.ratio_q3:.2f}; band {low:.2f} to {high:.2f}"
    )

# %% [markdown]
# 决定“明显”的是中间一半：单独一轮运气好，得不出结论；单独一轮运气差，也推不翻结论。
#
# 数据是原来的四倍，耗时可能超过原来的四倍。CPU 会把最近用过的数据留在缓存里：读 16 MiB、写 16 MiB，两次调用之间可能有一部分还留在缓存中，64 MiB 就留不住了。大的 GPU 也有这样的缓存（H100 的 L2 缓存有 50 MB），所以在能放进缓存的数据上测得的速率，可能超过数据手册给出的显存带宽。

# %% [markdown]
# ## 本课小结
#
# - 不等 GPU 做完就读时钟，量到的是启动。`d2l_gpu.Timer` 保留原书的方法名，每次读数之前都先等设备。
# - `d2l_gpu.benchmark` 先预热，至少计时 10 块，报告每次调用时间的中位数和四分位距。
# - CUDA 事件量的是两个标记之间的 GPU 时间线，空闲也算在内；只有队列一直排满，它量到的才只是计算本身。
# - `d2l_gpu.compare` 让两个调用按轮交替计时，只有一个容差区间：1.25 倍。比值在 0.8 到 1.25 之间算耗时相当，只有各轮比值的中间一半落在区间之外才算“明显”。
#
# 下一课：[10 – 性能分析器与 meta 设备](10-profiler-and-meta.ipynb)，逐个核函数地看一步的时间花在哪里。
