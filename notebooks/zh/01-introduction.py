# %% [markdown]
# # 引言：GPU 为什么重要，这台机器上有什么
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/01-introduction.ipynb)
#
# **你将学到**
#
# - 深度学习为什么离不开 GPU，本节最终要做到什么；
# - 怎样查看一台机器有哪些加速器，有没有 `nvidia-smi` 都可以；
# - PyTorch 的每个张量都记着自己所在的设备。
#
# **你需要**
#
# - 装有 PyTorch 和 `d2l_gpu` 的 Python 环境（在 Colab 上，下一个单元格会自动安装 `d2l_gpu`）；
# - GPU 不是必需的：没有 GPU 的笔记本电脑也能运行每个单元格，文中会说明换成 GPU 会看到什么。

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
# 后者不能比前者新。只支持 CPU 的 PyTorch 在这里打印 `None`，ROCm 版本则填写 `torch.version.hip`：

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
# 张量却可以放进 GPU 的显存，这时就由 GPU 来做它的运算。后面几个笔记本会把这个选择摆到明面上。
#
# ## 同一份代码，有 GPU 和没 GPU 的机器都会遇到
#
# 同一个脚本，今天跑在没有 GPU 的笔记本电脑上，明天跑在一块 GPU 的工作站上，
# 后天又被部署到八块 GPU 的云服务器上。认定有 GPU 的代码会在笔记本电脑上崩溃，
# 无视 GPU 的代码又白白浪费了服务器。`d2l_gpu` 里的辅助函数只挑实际存在的设备，
# 因此本节的代码在哪儿都能跑。
#
# 要完整地演示本节，需要两块 GPU，因为其中要展示数据从一块 GPU 搬到另一块。
# 全书只有这里需要不止一块；在云上租一台多卡机器用上一小时，花费并不高。
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
# 想在有 GPU 的机器上体验纯 CPU 的情形，可以在启动 Jupyter 之前设置环境变量
# `D2L_DEVICE=cpu`；`D2L_DEVICE=cuda:1` 则只留下第二块 GPU，作用类似 `CUDA_VISIBLE_DEVICES`。
#
# ## 接下来
#
# 1. [02 – 计算设备](02-computing-devices.ipynb)：怎样称呼 CPU 和各块 GPU，怎样只挑存在的设备。
# 2. [03 – 张量与 GPU](03-tensors-and-gpus.ipynb)：存储、复制，以及搬运数据的代价。
# 3. [06 – 神经网络与 GPU](06-neural-networks-and-gpus.ipynb)：把模型放到设备上。
# 4. [07 – 小结](07-summary.ipynb)：几条要点，以及最常见的错误。
# 5. [08 – 练习](08-exercises.ipynb) 与 [09 – 走出一台机器](09-beyond-one-machine.ipynb)。
