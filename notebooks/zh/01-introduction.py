# %% [markdown]
# # 引言：GPU 为什么重要，这台机器上有什么
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/01-introduction.ipynb)
#
# 在 NVIDIA H200 上运行的结果：[输出](../gpu/nvidia-h200/zh/01-introduction.ipynb)（较早版本）。
#
# **你将学到**
#
# - 深度学习为什么离不开 GPU，本节最终要做到什么；
# - 怎样查看一台机器有哪些加速器，有没有 `nvidia-smi` 都可以；
# - PyTorch 的每个张量都记着自己所在的设备；和原书所用的引擎不同，PyTorch 不另行指定就从 CPU 起步。
#
# **你需要**
#
# - 装有 PyTorch 和 `d2l_gpu` 的 Python 环境（在 Colab 上，下一个单元格会自动安装 `d2l_gpu`）；
# - GPU 不是必需的：没有 GPU 的笔记本电脑也能运行每个单元格，文中会说明换成 GPU 会看到什么。
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
# ## 硬件为什么要紧
#
# 大约从 2000 年起，单块 GPU 每秒能完成的运算量差不多每十年增长约一千倍，
# 模型的规模也随之膨胀。今天深度学习里的许多任务，如果只靠 CPU，时间上根本耗不起。
# 不过，速度不会自己送上门：GPU 是一块独立的设备，有自己的显存，
# 计算要用到的数据必须先放到那里。
#
# 本节要讲的正是这件事：怎样称呼各个设备，怎样把张量和模型放上去，
# 又怎样在设备之间搬运数据，而不把辛苦换来的速度浪费在路上。
# 我们先用一块 GPU，再在两块 GPU 之间复制数据；之后的章节会把训练分到多块 GPU、
# 多台服务器上（可先看 [09 – 走出一台机器](09-beyond-one-machine.ipynb)）。
#
# ## 看看硬件
#
# 装有 NVIDIA 显卡的机器上，命令行工具 `nvidia-smi` 随显卡驱动一起安装。
# 它列出每块卡的显存、负载以及正在使用它的进程。原书作者运行本节时，
# 用的是一台插着四块 16 GB V100 的服务器。下面的单元格在有 `nvidia-smi` 时直接运行它；
# 没有的话（笔记本电脑、苹果 Mac、只有 CPU 的云主机），就打印 `d2l_gpu` 的设备报告——
# 这份报告是直接问 PyTorch 它能用什么得来的。

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
# 只有 CPU 的机器上，报告里只有 CPU。有一块 NVIDIA GPU 时，`nvidia-smi` 会列出诸如
# “NVIDIA A100”的显卡及其以 MiB 计的显存；在 Apple 芯片的 Mac 上，报告里会多出一个 `mps` 设备。
#
# 使用 PyTorch 只需要装好驱动。支持 CUDA 的 PyTorch 安装包自带一份 CUDA 运行时库，
# 所以除非要自己编译 GPU 代码，否则用不着 NVIDIA 的 CUDA 工具包。有两个版本号很容易混淆：
# `nvidia-smi` 表头里的“CUDA Version”是已装*驱动*所能支持的最高 CUDA 版本，
# 并不表示机器上装了这个版本的 CUDA；`torch.version.cuda` 则是这份 PyTorch 编译时所用的 CUDA 版本。
# 驱动能运行版本不超过它所报告版本的任何 CUDA 运行时，跨大版本也一样：报告 12.4 的驱动，
# 可以运行用 CUDA 11.8 编译的 PyTorch。运行时比驱动新时，跨大版本就不行（12.x 的 PyTorch
# 配 11.x 的驱动）；在同一个大版本之内，CUDA 的小版本兼容性通常能让它运行，
# 只是少数需要新驱动的功能用不了。只支持 CPU 的 PyTorch 在这里打印 `None`，
# ROCm 版本则填写 `torch.version.hip`：

# %% tags=["nbval-ignore-output"]
print("PyTorch built with CUDA:", torch.version.cuda, "| with ROCm (HIP):", torch.version.hip)

# %% [markdown]
# ## 张量总在某个设备上
#
# PyTorch 的张量用起来和 NumPy 数组很像，只多了一样东西：
# 它记得自己的元素存放在哪个设备的内存里。不特意指定的话，就是 CPU，也就是电脑的内存。

# %%
import numpy as np

x = torch.arange(6).reshape(2, 3)
print(x)
print("x lives on:", x.device)
print("a tensor made from a NumPy array lives on:", torch.from_numpy(np.arange(6)).device)

# %% [markdown]
# NumPy 数组永远待在内存里，所以 NumPy 没有设备可选，由它生成的张量也从 CPU 上起步。
# 张量却可以放进 GPU 的显存，这时就由 GPU 来做它的运算。
#
# ## 设备由谁来选
#
# 原书所用的引擎 DJL 一发现 GPU，就自动把新数组放上去。PyTorch 不这样做：
# 代码不指定设备，张量就从 CPU 起步，所以后面各课每次都会写明设备。
#
# 也可以让 PyTorch 换个默认设备。`torch.set_default_device(d)` 之后，凡是没写设备的工厂函数调用
# （`torch.zeros`、`torch.randn`、`torch.tensor`，以及新建层的权重）都会放到 `d` 上。
# 这有两个代价。一是它靠一个钩子（“torch function mode”）实现，这个钩子会经手每一次从 Python
# 调用 torch 的操作，不只是工厂函数，所以每次调用都要多花一点时间；二是它把张量所在的位置藏了起来：
# 不写设备的代码在不同机器上意思不同，而 `torch.from_numpy` 和 `*_like` 系列函数又不理会这个默认值。
# `set_default_device(None)` 会撤掉钩子；改回 `"cpu"` 则钩子仍在。
# 下面的单元格把两种代价都展示出来：两个张量各落在哪里，以及钩子给一千次很小的 `torch.add`
# 增加了多少时间。计时用的是 `d2l_gpu.compare`，它让两边在几轮里轮流计时，并打印一条结论
# （[05](05-asynchrony-and-transfers.ipynb) 会细说）。每一边都在自己的一千次调用前后设置默认设备，
# 两边才能轮流；这次切换的开销与一千次调用相比很小。钩子在每次调用时都要多跑一段固定的 Python 代码，
# 与只加八个数的加法相比，这段开销很大，远远超出 `compare` 判定两边一致的 ±10% 范围，
# 所以结论不会被噪声左右。

# %% tags=["nbval-ignore-output", "key-result"]
device = d2l_gpu.try_gpu()
torch.set_default_device(device)
try:
    made, wrapped = torch.zeros(2), torch.from_numpy(np.zeros(2))
finally:
    torch.set_default_device(None)
print(f"default {device}: torch.zeros went to {made.device}, torch.from_numpy to {wrapped.device}")
print("after set_default_device(None), torch.zeros goes to", torch.zeros(2).device)

small = torch.ones(8)  # on the CPU on both sides: this times the hook, not a device


def adds(default):
    """1,000 tiny additions with `default` as the default device (None: no hook)."""
    torch.set_default_device(default)
    try:
        for _ in range(1000):
            torch.add(small, small)
    finally:
        torch.set_default_device(None)


hook = d2l_gpu.compare(
    lambda: adds(None),
    lambda: adds(device),
    labels=("1000 adds, no default device", f"1000 adds, default {device}"),
    device=d2l_gpu.cpu(),
    num_threads=1,
)
print(hook)

# %% [markdown]
# 有 GPU 时，第一行会显示 `torch.zeros` 在 `cuda:0` 上，而 `torch.from_numpy` 在 `cpu` 上：
# 看起来差不多的两行代码，落在两个设备上。钩子的代价在任何设备工作之前、在 Python 里就付掉了，
# 所以与默认设备是哪一个无关。本节各课都直接写明设备；只想管几行代码时，
# `with torch.device(d):` 也能做到同样的事，而且不改全局设置（[06](06-neural-networks-and-gpus.ipynb) 用到了它）。
#
# ## 同一份代码，有 GPU 和没 GPU 的机器都会遇到
#
# 同一个脚本，今天跑在没有 GPU 的笔记本电脑上，明天跑在一块 GPU 的工作站上，
# 后天又被部署到八块 GPU 的云服务器上。认定有 GPU 的代码会在笔记本电脑上崩溃，
# 无视 GPU 的代码又白白浪费了服务器。`d2l_gpu` 里的辅助函数只挑实际存在的设备，
# 因此本节的每一课在哪儿都能运行。
#
# 要按原样运行本节的每个演示，需要两块 GPU，因为其中一个演示要把数据从一块 GPU 复制到另一块；
# 书中后面用多块 GPU 训练的几章也至少需要两块。在云上租一台多卡机器用上一小时，花费并不高。
# GPU 不够时，想用第二块 GPU 的演示会拿 CPU 顶替，并在输出里说明。
# 下面的单元格告诉你这台机器属于哪种情况。

# %% tags=["nbval-ignore-output"]
n = d2l_gpu.num_gpus()
if n >= 2:
    print(f"{n} GPUs: every demonstration runs as written, copies between GPUs included.")
elif n == 1:
    print("1 GPU: demonstrations that want a second GPU use the CPU instead and say so.")
else:
    print("No GPU: everything runs on the CPU, and the text says what a GPU would show.")

# %% [markdown]
# 想在有 GPU 的机器上体验纯 CPU 的情形，可以在启动 Jupyter 之前设置环境变量 `D2L_DEVICE=cpu`。
# `D2L_DEVICE=cuda:1` 让辅助函数只提供第二块 GPU。这和 `CUDA_VISIBLE_DEVICES=1` 不是一回事。
# `D2L_DEVICE` 只改变 `d2l_gpu` 辅助函数（`try_gpu`、`try_all_gpus`、`num_gpus`）的回答：
# PyTorch 仍然看得见每一块卡，选中的那块也仍然叫 `cuda:1`。`CUDA_VISIBLE_DEVICES`
# 则作用于整个进程的 CUDA 运行时：没列出的卡对这个进程来说根本不存在，列出的卡从 0 重新编号，
# 于是那块卡成了 `cuda:0`。CUDA 只在初始化时读它一次，所以必须在进程第一次用 GPU 之前设好，
# 最好写在启动 Python 的命令里（[02](02-computing-devices.ipynb) 有演示）。
#
# ## 接下来
#
# 1. [02 – 计算设备](02-computing-devices.ipynb)：怎样称呼 CPU 和各块 GPU，怎样只挑存在的设备。
# 2. [03 – 张量与 GPU](03-tensors-and-gpus.ipynb)：把张量存到设备上，在设备之间复制。
# 3. [04 – GPU 显存](04-gpu-memory.ipynb)：一块 GPU 能装多少，PyTorch 占住了其中多少，显存用完会怎样。
# 4. [05 – 异步与传输](05-asynchrony-and-transfers.ipynb)：GPU 的工作为什么会跑在
#    Python 前面，怎样给它计时，搬运数据要付出什么代价。
# 5. [06 – 神经网络与 GPU](06-neural-networks-and-gpus.ipynb)：把模型放到设备上。
# 6. [07 – 小结](07-summary.ipynb)：几条要点，以及最常见的错误。
# 7. [08 – 练习](08-exercises.ipynb)，然后是 [09 – 走出一台机器](09-beyond-one-machine.ipynb)。

# %% [markdown]
# ## 本课小结
#
# - GPU 之所以重要，是因为它的运算能力远远超过了 CPU，但只对已经在它显存里的数据有用。
# - `nvidia-smi`（没有它时用 `d2l_gpu.device_report()`）告诉我们机器上有什么；
#   驱动的 CUDA 版本和 PyTorch 的 CUDA 版本是两个不同的数字。
# - 每个张量都记着自己的设备。PyTorch 从 CPU 起步；默认设备可以改，
#   代价是每次调用都慢一点，代码也不再一眼看得出张量在哪里。
# - `d2l_gpu` 只挑存在的设备；`D2L_DEVICE` 缩小它的选择范围，但不会对 PyTorch 隐藏任何 GPU。
#
# 下一篇：[02 – 计算设备](02-computing-devices.ipynb)，怎样称呼 CPU 和各块 GPU，怎样只挑存在的设备。
