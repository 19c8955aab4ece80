# %% [markdown]
# # 引言：GPU 为什么重要，这台机器上有什么
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/01-introduction.ipynb)
#
# 这些课在 GPU 上打印的结果：[notebooks/gpu](../gpu/README.md)。
#
# **你将学到**
#
# - 深度学习为什么离不开 GPU，本节最终要做到什么；
# - 怎样查看一台机器有哪些加速器，有没有 `nvidia-smi` 都可以；
# - PyTorch 的每个张量都记着自己所在的设备；和原书所用的引擎不同，不指定设备时，PyTorch 把新张量放在 CPU 上。
#
# **你需要**
#
# - 装有 PyTorch 和 `d2l_gpu` 的 Python 环境（在 Colab 上，下一个单元格会自动安装 `d2l_gpu`）；
# - GPU 不是必需的：没有 GPU 的笔记本电脑也能运行每个单元格，文中会说明换成 GPU 会看到什么。
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
# ## 硬件为什么重要
#
# 原书说，自 2000 年以来，GPU 的性能每十年增长约一千倍。书中的算力表列出了这一过程：
# 2000 年 Intel Core CPU 的 1 GFLOP/s，2010 年单块 NVIDIA C2050 的 1 TFLOP/s，
# 2020 年 DGX-2 的 1 PFLOP/s（一台机器里装十六块 V100，做 16 位张量运算；这是约数，按数据手册算是 16 × 125 = 2000 TFLOP/s）。下图在这张表旁边画出 NVIDIA 数据手册上单块 GPU 的峰值、从 K40 起按这个说法应有的增速（虚线），以及本机实测的一次矩阵乘法（点线）。

# %% mystnb={"image": {"alt": "\u534a\u5bf9\u6570\u56fe\uff1a2000 \u5230 2024 \u5e74\u7684\u8ba1\u7b97\u901f\u7387\uff08TFLOP/s\uff09\u3002\u56fe\u4e2d\u6709 NVIDIA \u6570\u636e\u624b\u518c\u4e0a float32\u300116 \u4f4d\u548c 8 \u4f4d\u5f20\u91cf\u8fd0\u7b97\u7684\u5cf0\u503c\uff0c\u539f\u4e66\u7b97\u529b\u8868\u7684\u4e09\u884c\uff0c\u4ece K40 \u8d77\u6bcf\u5341\u5e74\u589e\u957f\u4e00\u5343\u500d\u7684\u865a\u7ebf\uff0c\u4ee5\u53ca\u672c\u673a\u5b9e\u6d4b\u77e9\u9635\u4e58\u6cd5\u7684\u70b9\u7ebf"}} tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt

# 原书引言里的算力表：年份，TFLOP/s
book = {"Intel Core": (2000, 1e-3), "C2050": (2010, 1), "DGX-2": (2020, 1000)}
# NVIDIA 数据手册上单块 GPU 的峰值 TFLOP/s，有多种板型时取 SXM 版
year = {"K40": 2013, "P100": 2016, "V100": 2017, "A100": 2020, "H100": 2022, "B200": 2024}
float32 = {"K40": 4.29, "P100": 10.6, "V100": 15.7, "A100": 19.5, "H100": 67, "B200": 75}
tensor16 = {"V100": 125, "A100": 312, "H100": 989, "B200": 2250}  # FP16/BF16，稠密（不计稀疏）
tensor8 = {"H100": 1979, "B200": 4500}  # FP8，稠密

device = d2l_gpu.try_gpu()
side = 512 if device.type == "cpu" else 4096
a = torch.randn(side, side, device=device)
c = torch.empty_like(a)
seconds = d2l_gpu.benchmark(lambda: torch.matmul(a, a, out=c), device=device, min_run_time=0.1)
measured = 2 * side**3 / seconds.median / 1e12
threads = f", {torch.get_num_threads()} threads" if device.type == "cpu" else ""
what = f"{side}x{side} float32 product on {device}{threads}"
print(f"measured here, {what}: {measured:.3g} TFLOP/s")
k40 = float32["K40"]
print(f"datasheet peaks over the K40's float32: H100 float32 {float32['H100'] / k40:.0f}x, "
      f"FP16 {tensor16['H100'] / k40:.0f}x; B200 FP16 {tensor16['B200'] / k40:.0f}x, "
      f"FP8 {tensor8['B200'] / k40:.0f}x")

fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained", dpi=200)
kinds = (float32, "float32"), (tensor16, "FP16/BF16 tensor, dense"), (tensor8, "FP8 tensor, dense")
for peaks, kind in kinds:
    ax.semilogy([year[g] for g in peaks], list(peaks.values()), "o-", label=f"datasheet: {kind}")
for gpu, peak in float32.items():
    ax.annotate(gpu, (year[gpu], peak), xytext=(0, -13), textcoords="offset points", ha="center")
ax.semilogy(*zip(*book.values(), strict=True), "ks", label="the book's table")
for name, point in book.items():
    ax.annotate(name, point, xytext=(5, 5), textcoords="offset points", fontsize="small")
ax.semilogy([2013, 2024], [k40, k40 * 1000**1.1], "k--", label="1000x per decade from the K40")
ax.axhline(measured, color="red", linestyle=":", label=f"measured: {what}")
ax.set_xlabel("year (launch; the book's table: decade)")
ax.set_ylabel("rate (TFLOP/s)")
ax.legend(loc="lower right", fontsize="small")
plt.show()
plt.close(fig)

# %% [markdown]
# 按原书自己的表，这个说法成立，但靠的是三方面的变化，而不只是单个芯片变快：从 CPU 换成 GPU，再降低精度、在一台机器里装更多芯片。单块 GPU 在同一精度下增长要慢得多：从 K40（2013 年）到 H100（2022 年），float32 的峰值只增长了约 16 倍。张量核心上的 16 位运算，在 H100 上约为 K40 float32 峰值的 230 倍，在 B200 上约为 520 倍；B200（2024 年）上的 8 位运算过了十一年才超过一千倍，仍在虚线之下。点线只是一个速率水平，不对应任何发布年份：实测的乘法总低于数据手册上的峰值。此外，GPU 是一块独立的设备，有自己的显存，计算要用的数据必须先放进显存。
#
# 本节讲的正是这件事：怎样表示各个设备，怎样把张量和模型放上去，怎样在设备之间搬运数据而不白白损耗速度。先用一块 GPU，再用两块；更进一步的内容见 [13 – 走出单机](13-beyond-one-machine.ipynb)。
#
# ## 看看硬件
#
# 在装有 NVIDIA 显卡的机器上，命令行工具 `nvidia-smi` 随驱动一起安装。它列出每块卡的显存、负载，以及正在使用这块卡的进程。原书作者运行本节时，用的是一台装有四块 16 GB V100 的服务器。下面的单元格在有 `nvidia-smi` 时直接运行它，没有的话就打印 `d2l_gpu` 的设备报告，报告的内容来自 PyTorch 对本机的探测。

# %% tags=["nbval-ignore-output"]
import shutil
import subprocess

smi = shutil.which("nvidia-smi")
result = subprocess.run([smi], capture_output=True, text=True, check=False) if smi else None
if result is not None and result.returncode == 0:
    print(result.stdout)
else:
    reason = "nvidia-smi failed: " + result.stderr.strip() if result else "nvidia-smi not found"
    print(f"{reason}. What PyTorch sees on this machine:\n")
    print(d2l_gpu.device_report())

# %% [markdown]
# 只有 CPU 的机器上，报告里只有 CPU。有一块 NVIDIA GPU 时，`nvidia-smi` 会列出“NVIDIA A100”这样的型号，显存以 MiB 为单位；在 Apple 芯片的 Mac 上，报告里会有一个 `mps` 设备。
#
# 使用 PyTorch 只需要装驱动，因为支持 CUDA 的 PyTorch 安装包自带 CUDA 运行时。
# `nvidia-smi` 表头里的“CUDA Version”是*驱动*支持的最高 CUDA 版本；
# `torch.version.cuda` 则是当前安装的 PyTorch 编译时所用的 CUDA 版本，只要它的主版本号不比驱动的新，驱动就能运行它。只支持 CPU 的 PyTorch 在这里打印 `None`，ROCm 版的 PyTorch 则会给出 `torch.version.hip`：

# %% tags=["nbval-ignore-output"]
print("PyTorch built with CUDA:", torch.version.cuda, "| with ROCm (HIP):", torch.version.hip)

# %% [markdown]
# ## 张量总在某个设备上
#
# PyTorch 的张量用起来和 NumPy 数组很像，只多了一样东西：它记得自己的元素存放在哪个设备上。不特意指定的话，就是 CPU 和电脑的内存。

# %%
import numpy as np

x = torch.arange(6).reshape(2, 3)
print(x)
print("x lives on:", x.device)
print("a tensor made from a NumPy array lives on:", torch.from_numpy(np.arange(6)).device)

# %% [markdown]
# NumPy 数组总是放在内存里，所以 NumPy 无须选择设备。张量则可以放进 GPU 的显存，这时由 GPU 来做它的运算。
#
# ## PyTorch 默认把新张量放在 CPU 上
#
# 原书所用的引擎 DJL 一发现 GPU，就自动把新数组放到 GPU 上。PyTorch 不这样做。代码不指定设备，新张量就放在 CPU 上，所以后面各课每次都会写明设备。
#
# 调用 `torch.set_default_device(d)` 之后，凡是没写设备的工厂函数（`torch.zeros`、`torch.randn`、新建层的权重）都会把张量放到 `d` 上，但 `torch.from_numpy` 不受影响。它靠一个钩子实现，这个钩子会经手每一次对 torch 的调用，所以每次调用都多了一点 Python 开销。此外，不写设备的代码在不同机器上的含义也就不同了。`set_default_device(None)` 会撤掉钩子。设了默认设备之后，两个张量各自放在哪里：

# %%
device = d2l_gpu.try_gpu()
default = device if device.type != "cpu" else torch.device("meta")
torch.set_default_device(default)
try:
    made, wrapped = torch.zeros(2), torch.from_numpy(np.zeros(2))
finally:
    torch.set_default_device(None)
print(f"default {default}: torch.zeros went to {made.device}, torch.from_numpy to {wrapped.device}")
print("after set_default_device(None), torch.zeros goes to", torch.zeros(2).device)

# %% [markdown]
# `torch.zeros` 放到了默认设备上（有 GPU 时是 `cuda:0`；没有 GPU 时，单元格把默认设备设成不存储数据的 `meta`），`torch.from_numpy` 则放在 `cpu` 上：两个写法相似的调用，张量却落在两个设备上。本节各课都直接写明设备。如果只想影响几行代码，可以用 `with torch.device(d):`，效果相同，又不改全局设置。
#
# ## 让同一份代码在有无 GPU 的机器上都能运行
#
# 同一个脚本，可能跑在没有 GPU 的笔记本电脑上，也可能跑在有八块 GPU 的云服务器上。认定有 GPU 的代码会在笔记本电脑上崩溃，无视 GPU 的代码又白白浪费了服务器。
# `d2l_gpu` 的辅助函数只挑实际存在的设备。
#
# 要原样运行全部演示，需要两块 GPU，因为有一个演示要在两块 GPU 之间复制数据。
# GPU 不够时，这些演示用 CPU 代替两块 GPU 中的一块，并在输出里说明。下面的单元格告诉你属于哪种情况。

# %% tags=["nbval-ignore-output"]
n = d2l_gpu.num_gpus()
if n >= 2:
    print(f"{n} GPUs: every demonstration runs as written, copies between GPUs included.")
elif n == 1:
    print("1 GPU: demonstrations that want a second GPU use the CPU instead and say so.")
else:
    print("No GPU: everything runs on the CPU, and the text says what a GPU would show.")

# %% [markdown]
# 想在 GPU 机器上模拟没有 GPU 的笔记本电脑，可以在启动 Python 时隐藏所有 GPU（`CUDA_VISIBLE_DEVICES=`），做法见 [02](02-computing-devices.ipynb)。

# %% [markdown]
# ## 本课小结
#
# - 原书说的每十年一千倍，来自从 CPU 换成 GPU、降低精度和在一台机器里装更多 GPU；单块 GPU 的 float32 峰值九年只增长了约 16 倍。这些速度只对已经在显存里的数据有效。
# - `nvidia-smi`（没有它时用 `d2l_gpu.device_report()`）告诉我们机器上有什么。驱动的 CUDA 版本和 PyTorch 的 CUDA 版本是两个不同的数字。
# - 每个张量都记着自己的设备。PyTorch 默认把新张量放在 CPU 上。默认设备可以改，代价是每次调用都多一点开销，代码也不再一眼看得出张量在哪里。
# - `d2l_gpu` 的辅助函数只挑存在的设备，同一份代码有没有 GPU 都能运行。
#
# 下一课：[02 – 计算设备](02-computing-devices.ipynb)，怎样表示 CPU 和各块 GPU，怎样只挑存在的设备。
