# %% [markdown]
# # 三种瓶颈：算力、显存带宽与开销
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/11-three-limits.ipynb)
#
# 这些课在 GPU 上打印的结果：[notebooks/gpu](../gpu/README.md)。
#
# *拓展内容：本课超出了原书本节的范围。*
#
# **你将学到**
#
# - GPU 上的程序会受哪三种瓶颈制约：算力、显存带宽和开销；
# - 怎样对照一张常见设备的上限表，把测得的速率换算成上限的百分比，以及超过 100% 的速率说明什么：读时钟之前没有等设备做完，对显存带宽而言也可能是缓存；
# - 怎样用屋顶线图（roofline）把测得的点同时和两种上限对照。每种瓶颈的对策见 [12](12-remedies.ipynb)。
#
# **你需要**
#
# - 先读过 [09 – 给 GPU 计时](09-timing-a-gpu.ipynb)，了解 `benchmark`；例子来自 [04](04-asynchrony-and-transfers.ipynb) 和 [07](07-exercises.ipynb)。GPU 不是必需的：在 CPU 上每个单元格都能运行，文字会说明 GPU 上会看到什么。
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
# ## 三种瓶颈
#
# GPU 上的任何一项工作，都被下面三者之一拖住：
#
# - **算力**：运算单元一直在忙。大的矩阵乘法就是例子：两个 n × n 矩阵相乘，要对 3n² 个数做大约 2n³ 次运算，从显存取来的每个数都会被用上很多次。
# - **显存带宽**（在 CPU 上是内存带宽）：运算单元在等数据。`x * 2` 每读写 8 个字节只做一次乘法，决定它快慢的是显存（或内存），而不是运算。
# - **开销**：GPU 在等主机。04 里的小块复制、07 里的小矩阵乘法、每一步都调用一次 `.item()`，时间都花在 Python、启动核函数和同步上，GPU 则闲着。
#
# 要判断是哪一种，就把时间换算成*速率*（每秒多少次运算或多少字节），再拿它和设备在这一项上的上限相比。接近某个上限的工作，只有少做一些、或者换用更快的运算，才能更快。远低于两个上限的工作，时间往往耗在开销上；也可能是核函数太小，填不满 GPU，这时 GPU 在忙，但大部分运算单元闲着。主机上的时钟分不清这两种情况，[10](10-profiler-and-meta.ipynb) 里性能分析器的 GPU 一列却可以：核函数的 GPU 时间填满整步，说明 GPU 一直在忙。
#
# ## 常见设备的上限
#
# | 设备（PyTorch 报告的名字） | float32 TFLOP/s | TF32 TFLOP/s | float16 / bfloat16 TFLOP/s | 显存/内存带宽 GB/s | 主机链路 GB/s（PCIe ×16） |
# | --- | --- | --- | --- | --- | --- |
# | H200 SXM（`NVIDIA H200`） | 67 | 495 | 989 | 4,800 | 63（5.0） |
# | H200 NVL（`NVIDIA H200 NVL`） | 60 | 418 | 835 | 4,800 | 63（5.0） |
# | H100 SXM（`NVIDIA H100 80GB HBM3`） | 67 | 495 | 989 | 3,350 | 63（5.0） |
# | H100 NVL（`NVIDIA H100 NVL`） | 60 | 418 | 835 | 3,900 | 63（5.0） |
# | H100 PCIe（`NVIDIA H100 PCIe`） | 51 | 378 | 756 | 2,000 | 63（5.0） |
# | A100 SXM4 80 GB（`NVIDIA A100-SXM4-80GB`） | 19.5 | 156 | 312 | 2,039 | 31.5（4.0） |
# | A100 SXM4 40 GB，即 Colab 的 A100（`NVIDIA A100-SXM4-40GB`） | 19.5 | 156 | 312 | 1,555 | 31.5（4.0） |
# | L4（`NVIDIA L4`） | 30.3 | 60 | 121 | 300 | 31.5（4.0） |
# | RTX 4090（`NVIDIA GeForce RTX 4090`） | 82.6 | 82.6 | 165 | 1,008 | 31.5（4.0） |
# | RTX 3090（`NVIDIA GeForce RTX 3090`） | 35.6 | 35.6 | 71 | 936 | 31.5（4.0） |
# | V100 SXM2、PCIe（`Tesla V100-SXM2-16GB`、`-PCIE-16GB`，32GB 的相同） | 15.7、14 | 无 | 125、112 / 无 | 900 | 15.8（3.0） |
# | T4（`Tesla T4`） | 8.1 | 无 | 65 / 无 | 320 | 15.8（3.0） |
# | P100，即 Kaggle 的 P100（`Tesla P100-PCIE-16GB`） | 9.3 | 无 | 18.7 / 无 | 732 | 15.8（3.0） |
# | Apple M2，GPU 有 10 个核心（`Apple M2`） | 3.6 | 无 | 无 | 100（与 CPU 共用） | 无（统一内存） |
# | CPU（估计值） | 线程数 × 3 GHz × 32 或 64 | 无 | 无 | 约 50 | 无 |
#
# GPU 的数字都是厂商公布的（NVIDIA 的数据手册和 GeForce 架构白皮书，Apple 发布 M2 时给出的数字）。NVIDIA 的手册给出的张量核心数字针对“2:4 稀疏”矩阵，普通的矩阵乘法用不上；有的手册在旁边同时列出稠密数字，有的只在脚注里说明。表里给的是稠密数字，即稀疏数字的一半；GeForce 显卡给的是按 float32 累加的数字，PyTorch 正是这样累加的。float16 和 bfloat16 的数字相同，但 V100 和 T4 只支持 float16，P100 没有张量核心。GPU 只有 8 个核心的 M2 报告的名字相同，算力是表中数字的 8/10。主机链路指显卡所插的 PCIe 插槽，按单向计；插槽较旧时会更慢。显存/内存带宽把读的字节和写的字节都算在内。
#
# 没有哪个程序能达到数据手册上的峰值。在 A100 或 H100 上，大的矩阵乘法实测最好也只能达到峰值的 80% 左右，所以达到 70% 就已经很好了。功耗受限的显卡能持续达到的要低得多：T4（70 W）在长时间的矩阵乘法中会降低频率，达到 40% 到 60% 在它上面是正常的。
#
# CPU 在这里没有数据手册可查，所以最后一行是**估计值**：每个线程按约 3 GHz、每个时钟周期 32 次 float32 运算计（AVX2：两条融合乘加指令，各处理 8 个数），有 AVX-512 时按 64 次；内存按约 50 GB/s 计，即双通道 DDR4-3200。超过估计值只说明这台机器比估计的快。超过数据手册数字的速率是测量错误：对运算次数来说，是读时钟之前没有等设备做完。对显存带宽来说，还可能是缓存，它比显存（内存）快；所以本课在每种设备上都搬运 256 MiB，超出缓存能装下的大小（见 [09](09-timing-a-gpu.ipynb)）。

# %% tags=["nbval-ignore-output"]
import subprocess
import time

# 表中各列（TFLOP/s、GB/s），表里没有的记作 None；数字来自 NVIDIA 的数据手册、
# Ada 和 GA102 架构白皮书（GeForce）以及 Apple 发布 M2 时的数字
LIMITS = {
    "NVIDIA H200": dict(float32=67, float16=989, memory=4800, link=63),
    "NVIDIA H200 NVL": dict(float32=60, float16=835, memory=4800, link=63),
    "NVIDIA H100 80GB HBM3": dict(float32=67, float16=989, memory=3350, link=63),
    "NVIDIA H100 NVL": dict(float32=60, float16=835, memory=3900, link=63),
    "NVIDIA H100 PCIe": dict(float32=51, float16=756, memory=2000, link=63),
    "NVIDIA A100-SXM4-80GB": dict(float32=19.5, float16=312, memory=2039, link=31.5),
    "NVIDIA A100-SXM4-40GB": dict(float32=19.5, float16=312, memory=1555, link=31.5),
    "NVIDIA L4": dict(float32=30.3, float16=121, memory=300, link=31.5),
    "NVIDIA GeForce RTX 4090": dict(float32=82.6, float16=165, memory=1008, link=31.5),
    "NVIDIA GeForce RTX 3090": dict(float32=35.6, float16=71, memory=936, link=31.5),
    "Tesla V100-SXM2-16GB": dict(float32=15.7, float16=125, memory=900, link=15.8),
    "Tesla V100-SXM2-32GB": dict(float32=15.7, float16=125, memory=900, link=15.8),
    "Tesla V100-PCIE-16GB": dict(float32=14, float16=112, memory=900, link=15.8),
    "Tesla V100-PCIE-32GB": dict(float32=14, float16=112, memory=900, link=15.8),
    "Tesla T4": dict(float32=8.1, float16=65, memory=320, link=15.8),
    "Tesla P100-PCIE-16GB": dict(float32=9.3, float16=18.7, memory=732, link=15.8),
    "Apple M2": dict(float32=3.6, float16=None, memory=100, link=None),
}

device = d2l_gpu.try_gpu()
torch.set_num_threads(1)  # 和 09 一样，CPU 只用一个线程
if device.type == "cuda":
    name = torch.cuda.get_device_name(device)
elif device.type == "mps":  # macOS 报告的芯片名
    ask = ["sysctl", "-n", "machdep.cpu.brand_string"]
    name = subprocess.run(ask, capture_output=True, text=True).stdout.strip()
else:
    name = "this CPU"
if name in LIMITS:
    limits, source = LIMITS[name], "datasheet"
elif device.type == "cpu":
    per_cycle = 64 if "AVX512" in torch.backends.cpu.get_cpu_capability() else 32
    float32 = torch.get_num_threads() * 3e9 * per_cycle / 1e12
    limits, source = dict(float32=float32, float16=None, memory=50, link=None), "estimate"
else:
    limits, source = {}, None
units = dict(float32="TFLOP/s", float16="TFLOP/s", memory="GB/s", link="GB/s")
known = ", ".join(f"{k} {v:.4g} {units[k]}" for k, v in limits.items() if v is not None)
if source:
    print(f"{name} ({device}), limits from the {source}: {known}")
else:
    print(f"{name} ({device}) is not in the table: no limits known, so no roof to draw")


def against_limit(what, rate, unit, kind):
    # 打印速率占设备同类上限的百分比
    limit = limits.get(kind)
    if limit is None:
        print(f"{what}: {rate:.3g} {unit}; no {kind} limit known for {name}")
        return
    share = f"{100 * rate / limit:.1f} % of {limit:.4g} ({kind}, {source})"
    line = f"{what}: {rate:.3g} {unit} = {share}"
    if rate > limit and source == "estimate":
        line += "\n  above the estimate: this machine beats it, or the data sat in a cache"
    elif rate > limit and kind == "memory":
        line += "\n  above 100 %: the data sat in a cache, or the clock did not wait for the device"
    elif rate > limit:
        line += "\n  above 100 %: a mis-measurement, the clock did not wait for the device"
    print(line)


# %% [markdown]
# ## 算力：一次大的矩阵乘法，以及不等设备就读时钟的错误
#
# 下面的单元格用 `benchmark` 给 n × n 矩阵乘法（2n³ 次运算）计时，并打印它的速率占 float32 上限的百分比。接着它故意犯一个在网上文章里很常见的错误：不等设备做完就读普通时钟，以此给十次乘法计时。在 GPU 上，这个时钟只量到了启动，算出的“速率”远远超过数据手册的 100%。在 CPU 上，计算在每次调用之内完成，两个速率很接近。
#
# 这个单元格和本课所有 CUDA 分支都还没有在 GPU 上运行过。

# %% tags=["nbval-ignore-output", "key-result"]
n = 512 if device.type == "cpu" else 8192
a = torch.randn(n, n, device=device)
c = torch.empty_like(a)
flop = 2 * n**3


def float32_product():
    torch.matmul(a, a, out=c)


product = d2l_gpu.benchmark(float32_product, device=device, label=f"{n}x{n} product")
print(product)
against_limit("float32 product", flop / product.median / 1e12, "TFLOP/s", "float32")

d2l_gpu.synchronize(device)
start = time.perf_counter()
for _ in range(10):
    float32_product()
hasty = (time.perf_counter() - start) / 10  # 设备还没做完就读了时钟
d2l_gpu.synchronize(device)
against_limit("same, clock not waiting", flop / hasty / 1e12, "TFLOP/s", "float32")

# %% [markdown]
# ## 显存带宽与开销
#
# 复制和 `x * 2` 都把每个字节读一次、写一次。张量很大时，两者的速率应当相近，都能达到带宽上限的相当一部分：与搬运数据相比，乘法几乎不花时间。同样的 `x * 2` 换到 1 KiB 上，时间就全是开销（Python、PyTorch 的分发器，在 GPU 上还有一次要花几微秒的核函数启动），速率远远低于大张量时的速率。

# %% tags=["nbval-ignore-output", "key-result"]
big = torch.ones(64 * 2**20, device=device)  # 256 MiB：超出缓存能装下的大小
big_out = torch.empty_like(big)
tiny = torch.randn(256, device=device)  # 1 KiB 的数据
tiny_out = torch.empty_like(tiny)
elementwise = {}  # x * 2 每搬运一字节的运算次数和每秒运算次数，供下面的屋顶线图使用
for what, tensor, fn in (
    ("copy, large", big, lambda: big_out.copy_(big)),
    ("x * 2, large", big, lambda: torch.mul(big, 2, out=big_out)),
    ("x * 2, 1 KiB", tiny, lambda: torch.mul(tiny, 2, out=tiny_out)),
):
    m = d2l_gpu.benchmark(fn, device=device, label=what)
    moved = 2 * tensor.nbytes  # 每个字节读一次、写一次
    against_limit(f"{what} ({m.median * 1e6:,.1f} us)", moved / m.median / 1e9, "GB/s", "memory")
    if what.startswith("x * 2"):  # 每个数一次乘法
        elementwise[what] = (tensor.numel() / moved, tensor.numel() / m.median)

# %% [markdown]
# 主机链路是第三种速率。在 CUDA GPU 上，下面的单元格从主机复制 64 MiB，一次从普通内存，一次从锁页内存（见 [04](04-asynchrony-and-transfers.ipynb)），并把两者都和链路上限对照。CPU 和 Apple GPU 没有这条链路：主机和设备共用一块内存。

# %% tags=["nbval-ignore-output", "key-result"]
if device.type == "cuda":
    ordinary = torch.randn(16 * 2**20)  # 64 MiB 的数据
    pinned = ordinary.pin_memory()
    landing = torch.empty(ordinary.shape, device=device)
    for what, host in (("ordinary memory", ordinary), ("pinned memory", pinned)):
        m = d2l_gpu.benchmark(lambda h=host: landing.copy_(h), device=device)
        against_limit(f"host to device, {what}", ordinary.nbytes / m.median / 1e9, "GB/s", "link")
else:
    print(f"no host link on {device}: the host and the device share one memory")

# %% [markdown]
# 矩阵乘法里也看得到开销：64 次小矩阵乘法（每个 64 × 64，和 [07](07-exercises.ipynb) 里的一样）一个接一个地计算，速率远远低于 float32 上限。

# %% tags=["nbval-ignore-output", "key-result"]
stack = torch.randn(64, 64, 64, device=device)  # 64 个 64 × 64 的矩阵
stack_out = torch.empty_like(stack)


def one_by_one():
    for m, out in zip(stack, stack_out, strict=True):
        torch.mm(m, m, out=out)


small = d2l_gpu.benchmark(one_by_one, device=device, label="64 small products")
print(small)
stack_flop = 64 * 2 * 64**3  # 64 次 64 × 64 的矩阵乘法
against_limit("64 small products", stack_flop / small.median / 1e12, "TFLOP/s", "float32")

# %% [markdown]
# *屋顶线图*（roofline）把两种上限画在同一张图上：横轴是*算术强度*（arithmetic intensity），即每搬运一字节所做的运算次数，纵轴是速率；左边的斜线是带宽上限，右边的平顶是算力上限，两者在脊点（点线）相交；表里有 16 位数字时，虚线屋顶是 [12](12-remedies.ipynb) 的对策中 16 位乘法的上限。

# %% mystnb={"image": {"alt": "\u53cc\u5bf9\u6570\u5c4b\u9876\u7ebf\u56fe\uff1a\u6a2a\u8f74\u662f\u7b97\u672f\u5f3a\u5ea6\uff08\u6bcf\u642c\u8fd0\u4e00\u5b57\u8282\u7684\u8fd0\u7b97\u6b21\u6570\uff09\uff0c\u7eb5\u8f74\u662f\u901f\u7387\uff08GFLOP/s\uff09\u3002\u8bbe\u5907\u7684\u5e26\u5bbd\u659c\u7ebf\u4e0e float32 \u5e73\u9876\u5728\u70b9\u7ebf\u6807\u51fa\u7684\u810a\u70b9\u76f8\u4ea4\uff0c\u8868\u91cc\u6709 16 \u4f4d\u6570\u5b57\u65f6\u53e6\u6709\u4e00\u6761\u865a\u7ebf\u5c4b\u9876\uff1b\u56fe\u4e2d\u7684\u70b9\u662f\u6d4b\u5f97\u7684\u5927\u77e9\u9635\u4e58\u6cd5\u3001256 MiB \u548c 1 KiB \u4e0a\u7684 x * 2\u300164 \u6b21\u5c0f\u77e9\u9635\u4e58\u6cd5\uff0c\u53c9\u53f7\u662f\u4e0d\u7b49\u8bbe\u5907\u5c31\u8bfb\u65f6\u949f\u6d4b\u5f97\u7684\u77e9\u9635\u4e58\u6cd5\u3002"}} tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt

product_per_byte = flop / (3 * a.nbytes)  # 读两次 a、写一次 c：共 3n² 个数
stack_per_byte = stack_flop / (3 * stack.nbytes)
measured = {  # 名称：(每搬运一字节的运算次数, 每秒运算次数)
    "large product": (product_per_byte, flop / product.median),
    **elementwise,
    "64 small products": (stack_per_byte, stack_flop / small.median),
}
fig, ax = plt.subplots(figsize=(6, 3.6), dpi=200, layout="constrained")
highest = None  # 单位为 FLOP/s
if limits.get("float32") and limits.get("memory"):
    intensity = torch.logspace(-2, 4, 200)
    for kind, style, what in (("float32", "k-", "float32"), ("float16", "k--", "16-bit")):
        if limits.get(kind):
            highest = limits[kind] * 1e12
            roof = torch.clamp(intensity * limits["memory"] * 1e9, max=highest)
            ax.loglog(intensity, roof / 1e9, style, label=f"{what} roof ({source})")
    ridge = limits["float32"] * 1e3 / limits["memory"]  # 单位为每字节的运算次数
    ax.axvline(ridge, color="gray", linestyle=":", label=f"ridge, {ridge:.3g} FLOP/byte")
    ax.set_title(f"{name} ({device})")
else:  # 不在表里的设备，也画出它的点
    ax.set_title(f"{name} ({device}): not in the table, no datasheet roof")
for what, (per_byte, rate) in measured.items():
    ax.loglog(per_byte, rate / 1e9, "o", label=what)
# 不等设备测得的点远高于所有屋顶时，会把其余的点挤扁
clipped = highest is not None and flop / hasty > 10 * highest
hasty_point = (product_per_byte, (10 * highest if clipped else flop / hasty) / 1e9)
label = "large product, clock not waiting" + (" (clipped)" if clipped else "")
ax.loglog(*hasty_point, "kx", markersize=10, zorder=1, label=label)  # 画在圆点下面
if source == "datasheet" and flop / hasty > limits["float32"] * 1e12:
    note = "above the roof: a mis-measurement"
    ax.annotate(note, hasty_point, xytext=(-190, -4), textcoords="offset points")
ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
ax.set_ylabel("rate (GFLOP/s)")
ax.legend(fontsize="x-small")
plt.show()
plt.close(fig)

# %% [markdown]
# 靠近斜线的点是带宽受限的，靠近平顶的点是计算受限的；远低于两者的点（1 KiB 的 `x * 2`、64 次小矩阵乘法）受开销拖累，在 GPU 上也可能是工作太小、填不满 GPU。不等设备就读时钟得到的叉号，在 CPU 上紧挨着 `benchmark` 测得的点；在 GPU 上则远远高出这个点，只要表里有这块 GPU，它还会高出屋顶，而真实的速率不可能超过屋顶。

# %% [markdown]
# ## 本课小结
#
# - 工作受算力（大的矩阵乘法）、显存带宽（`x * 2`）或开销（小块复制和小矩阵乘法、每一步同步一次）限制。
# - 把速率和上限相比，就能看出是哪一种：表中给出数据手册上的稠密峰值，CPU 用估计值。实际能达到的最高水平约为峰值的 80%，功耗受限的显卡更低。超过 100% 的速率说明读时钟之前没有等设备做完，对显存带宽而言，也可能是缓存提供了数据。
# - 屋顶线图把每个测得的点同时和两种上限对照。
#
# 下一课：[12 – 对策](12-remedies.ipynb)，每种瓶颈的对策，都经过实测。
