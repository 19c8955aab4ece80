# %% [markdown]
# # 计算设备：怎样表示 CPU 和 GPU
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/02-computing-devices.ipynb)
#
# 这些课在 GPU 上打印的结果：[notebooks/gpu](../gpu/README.md)。
#
# **你将学到**
#
# - PyTorch 怎样表示 CPU 和每一块 GPU；
# - 怎样数出有几块 GPU，一个进程能看到其中哪几块，怎样把它们隐藏；
# - 原生 PyTorch 怎样选加速器，以及 `try_gpu` 和 `try_all_gpus` 两个辅助函数：不管要的 GPU 在不在，它们都能运行。
#
# **你需要**
#
# - 先读过 [01 – 引言](01-introduction.ipynb)；GPU 不是必需的。
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
# ## 设备的名字
#
# `torch.device` 表示存放张量、对张量做运算的位置。
# CPU 只有一个名字 `cpu`，不管它有多少个核心，因为这些核心共用电脑的内存。每块 GPU 有自己的显存，也有自己的名字：`cuda:0` 是第一块，`cuda:1` 是第二块，单写 `cuda` 指当前的那块卡，没有改过就是 `cuda:0`。（ROCm 下的 AMD 显卡也用 `cuda` 这套名字；Apple 芯片的 Mac 只有一块 GPU，叫 `mps`。）
#
# 创建一个 `torch.device` 对象既不分配任何存储，也不做任何检查，所以下面几行在任何机器上都能运行：

# %%
for name in [torch.device("cpu"), torch.device("cuda"), torch.device("cuda", 1)]:
    print(repr(name))

# %% [markdown]
# 原书的 Java 代码写的是“gpu”，但 PyTorch 没有这种设备类型。报错信息列出了它认识的全部类型：

# %%
try:
    torch.device("gpu")
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# 单写的 `cuda` 不带编号，所以它和 `cuda:0` 是两个不同的名字，尽管两者通常都指第一块 GPU。张量记下的设备带着编号，因此拿张量的 `device` 和 `torch.device("cuda")` 比较，结果总是 `False`。应当比较设备类型，或者使用带编号的名字。

# %%
plain, first = torch.device("cuda"), torch.device("cuda:0")
print("equal:  ", plain == first)
print("indices:", plain.index, first.index)

# %% tags=["nbval-ignore-output"]
if d2l_gpu.accelerator_type() == "cuda":  # 辅助函数可以使用的 CUDA GPU
    on_gpu = torch.ones(1, device=d2l_gpu.try_gpu())
    print("a tensor on the helpers' first GPU is on", on_gpu.device)
    print("its device == torch.device('cuda'):", on_gpu.device == torch.device("cuda"))
    print("its device.type == 'cuda':         ", on_gpu.device.type == "cuda")
else:
    print("No CUDA GPU: no tensor can be made with device='cuda' here.")

# %% [markdown]
# 在 CUDA 机器上，上面的单元格依次显示 `cuda:0`、`False` 和 `True`。
#
# 大多数 PyTorch 代码用一行惯用写法选设备，靠的是 `torch.cuda.is_available()`。只有 PyTorch 编译时支持 CUDA（或 ROCm），并且驱动至少找到一块 GPU，它才返回 `True`：

# %%
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
print(device)

# %% [markdown]
# 这种写法只认 CUDA：在 Apple 芯片的 Mac 上，即使有 `mps` GPU，它也会选 CPU。
# `d2l_gpu` 沿用原书的简短函数名：`gpu(i)` 给出第 i 块 GPU 的名字，类型随当前 PyTorch 所用的加速器而定（没有加速器时给出 CUDA 的名字）。

# %%
for name in [d2l_gpu.cpu(), d2l_gpu.gpu(), d2l_gpu.gpu(1)]:
    print(repr(name))

# %% [markdown]
# 从 2.6 版起，原生 PyTorch 也有了不限厂商的选法：`torch.accelerator.current_accelerator()`
# 给出当前安装的 PyTorch 能用的加速器（CUDA、MPS、XPU 等），`torch.accelerator.is_available()`
# 告诉我们有没有加速器，`torch.accelerator.device_count()` 数出有几块。它给出的名字不带编号；后面介绍的 `try_gpu` 会补上编号。两者并排比较：

# %%
if torch.accelerator.is_available():
    chosen = torch.accelerator.current_accelerator()
else:
    chosen = torch.device("cpu")
print("plain PyTorch:     ", chosen)
print("d2l_gpu.try_gpu(): ", d2l_gpu.try_gpu())

# %% [markdown]
# ## 有几块 GPU？
#
# `torch.cuda.device_count()` 只数 CUDA（以及 ROCm）显卡；`torch.accelerator.device_count()`
# 和 `d2l_gpu.num_gpus()` 把 Apple 和 Intel 的 GPU 也算在内。只有 CPU 的机器打印几个 0 和 `None`。有一块 NVIDIA 显卡时打印 `1`、`1`、`1` 和 `cuda`，两块时打印 `2`、`2`、`2` 和 `cuda`。数 GPU 只是问驱动有几块卡，不会在卡上占用任何资源。

# %% tags=["nbval-ignore-output"]
print("torch.cuda.device_count():       ", torch.cuda.device_count())
print("torch.accelerator.device_count():", torch.accelerator.device_count())
print("d2l_gpu.num_gpus():              ", d2l_gpu.num_gpus())
print("d2l_gpu.accelerator_type():      ", d2l_gpu.accelerator_type())

# %% [markdown]
# ## 一个进程能看到哪些 GPU
#
# 这些是*这个进程*能用的 GPU，而不是机器上插了几块。环境变量 `CUDA_VISIBLE_DEVICES`（AMD 的 ROCm 用 `HIP_VISIBLE_DEVICES`）列出一个进程能看到的卡，列出的卡从 0 开始重新编号。在有四块 GPU 的机器上，`CUDA_VISIBLE_DEVICES=2,3` 只留下两块：物理上的 2 号 GPU 成为 `cuda:0`，3 号成为 `cuda:1`。集群的作业调度系统常常为每个作业设好这个变量。
# CUDA 只在进程里初始化时读取一次这个变量，所以应当把它写在启动 Python 或 Jupyter 的命令里（`CUDA_VISIBLE_DEVICES=1 python train.py`）；笔记本已经用过 GPU 之后再设置它，就不起作用了。本进程启动时得到的值是：

# %% tags=["nbval-ignore-output"]
import os

print("CUDA_VISIBLE_DEVICES:", os.environ.get("CUDA_VISIBLE_DEVICES", "not set"))

# %% [markdown]
# 值为空时，所有 CUDA GPU 都被隐藏。想在 GPU 机器上模拟没有 GPU 的笔记本电脑，就这样做：用 `CUDA_VISIBLE_DEVICES= jupyter lab` 启动，或者用 `CUDA_VISIBLE_DEVICES= python 02-computing-devices.py`
# 运行某一课。这时 `try_gpu()` 返回 CPU，每个单元格都和在笔记本电脑上一样运行。（这个办法隐藏不了 Apple 的 GPU。）
#
# ## 当前 GPU
#
# 在一个进程里，单写的 `cuda` 指*当前* CUDA 设备，没有改过就是 `cuda:0`。
# `torch.cuda.set_device(i)` 会在进程余下的时间里改变它。一个进程只用一块 GPU 时，就该用它：在 `torchrun` 启动的作业里，每个进程按本地编号选一块 GPU，并对它调用一次 `set_device`，`d2l_gpu.distributed` 就是这样做的（见 [13](13-beyond-one-machine.ipynb)）。一个进程要用多块 GPU 时，更适合用
# `torch.cuda.device(i)`：它只在代码块内改变当前设备，离开时恢复原样，即使出错也一样。有两块 GPU 时，下面的单元格先打印当前设备 `0`，再打印块内新建的张量在 `cuda:1` 上，最后又打印 `0`。只有一块 GPU 时，辅助函数给出的最后一块 GPU 就是 `cuda:0` 本身，所以看不出任何变化。

# %% tags=["nbval-ignore-output"]
if d2l_gpu.accelerator_type() == "cuda":
    last = d2l_gpu.try_all_gpus()[-1]
    print("current CUDA device:", torch.cuda.current_device())
    with torch.cuda.device(last):
        print(f"inside torch.cuda.device({last}), 'cuda' means", torch.ones(1, device="cuda").device)
    print("after the block, the current CUDA device is again", torch.cuda.current_device())
else:
    print("No CUDA GPU: there is no current CUDA device to change.")

# %% [markdown]
# ## 要一块未必存在的 GPU
#
# 直接写 `torch.device("cuda:1")` 的代码，在 GPU 少于两块的机器上，一在这块卡上创建张量就会出错。下面两个辅助函数可以避免这个问题：
#
# - `try_gpu(i)`：第 i 块 GPU 存在就返回它，否则返回 CPU；
# - `try_all_gpus()`：返回全部 GPU，一块都没有时返回 `[cpu]`。
#
# `try_gpu(3)` 要的是第四块 GPU，很少有机器有这么多卡：

# %%
print("try_gpu():  ", d2l_gpu.try_gpu())
print("try_gpu(3): ", d2l_gpu.try_gpu(3))

# %% tags=["nbval-ignore-output"]
d2l_gpu.try_all_gpus()

# %% [markdown]
# 没有 GPU 时，两次 `try_gpu` 都得到 CPU，`try_all_gpus()` 得到 `[device(type='cpu')]`。有一块 GPU 时，结果是 `cuda:0`、`cpu` 和 `[cuda:0]`；有两块时，是 `cuda:0`、`cpu` 和 `[cuda:0, cuda:1]`。
#
# 编号必须是从 0 开始的整数。其他值会直接报错，而不是返回 CPU：

# %%
try:
    d2l_gpu.try_gpu(-1)
except (TypeError, ValueError) as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# ## 选一次，处处用
#
# 在脚本开头选定一次设备，之后凡是创建张量的地方都传入它。
# PyTorch 从不擅自搬运操作数，所以这一个变量决定了所有数据放在哪里。

# %%
device = d2l_gpu.try_gpu()
x = torch.ones(2, 3, device=device)
print("x is on the chosen device:", x.device == device)
print("x is on", x.device)

# %% [markdown]
# ## 本课小结
#
# - `cpu` 指主机；`cuda:0`、`cuda:1`……各指一块 GPU 及其显存；单写的 `cuda` 指当前 GPU。
# - 数出来的 GPU 是这个进程能看到的那些。`CUDA_VISIBLE_DEVICES` 要在 CUDA 初始化之前设好，它隐藏一部分显卡，其余的从 0 重新编号。
# - 每个进程只用一块 GPU 时用 `torch.cuda.set_device`；`torch.cuda.device` 只在一个代码块里改变当前 GPU。
# - 原生 PyTorch 用 `torch.accelerator` 选加速器；`try_gpu` 和 `try_all_gpus` 加上了编号，没有 GPU 时退回 CPU。
#
# 下一课：[03 – 张量与 GPU](03-tensors-and-gpus.ipynb)，把张量放到这些设备上。
