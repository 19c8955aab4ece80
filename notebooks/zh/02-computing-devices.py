# %% [markdown]
# # 计算设备：给 CPU 和 GPU 起名字
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/02-computing-devices.ipynb)
#
# 在 NVIDIA H200 上运行的结果：[输出](../gpu/nvidia-h200/zh/02-computing-devices.ipynb)（较早版本）。
#
# **你将学到**
#
# - PyTorch 怎样称呼 CPU 和每一块 GPU，一个 GPU 设备代表什么；
# - 怎样数出一台机器上有几块 GPU，一个进程又能看到其中哪几块；
# - 原生 PyTorch 怎样选加速器；以及 `try_gpu` 和 `try_all_gpus` 两个辅助函数：
#   要的 GPU 在不在，同一份代码都能运行。
#
# **你需要**
#
# - 先读过 [01 – 引言](01-introduction.ipynb)；GPU 不是必需的。
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
# ## 设备的名字
#
# `torch.device` 指明一个地方：张量存在那里，针对它们的运算也在那里进行。
# CPU 只有一个名字 `cpu`，不管它有多少个核心——这些核心共用电脑的内存。
# GPU 则每块各有名字，因为每块卡都有自己的显存：`cuda:0` 是第一块，`cuda:1` 是第二块，
# 单写 `cuda` 指当前那块卡，不另行设置的话就是 `cuda:0`。
# （ROCm 下的 AMD 显卡沿用 `cuda` 这套名字；Apple 芯片的 Mac 只有一块 GPU，叫 `mps`。）
#
# 起个名字既不分配内存，也不做检查，所以下面这几行在任何机器上都能运行：

# %%
for name in [torch.device("cpu"), torch.device("cuda"), torch.device("cuda", 1)]:
    print(repr(name))

# %% [markdown]
# 原书的 Java 代码写的是“gpu”，可 PyTorch 并没有这种设备类型。
# 报错信息里列出了它认得的全部类型：

# %%
try:
    torch.device("gpu")
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# 单写的 `cuda` 不带编号，所以它和 `cuda:0` 是两个不同的名字，尽管在大多数机器上两者都指第一块 GPU。
# 张量记下的总是它所在的具体设备，连同编号，因此拿它的 `device` 去和 `torch.device("cuda")`
# 比较，结果总是 `False`；应当比较设备类型，或者使用带编号的名字。

# %%
plain, first = torch.device("cuda"), torch.device("cuda:0")
print("equal:  ", plain == first)
print("indices:", plain.index, first.index)

# %% tags=["nbval-ignore-output"]
if d2l_gpu.accelerator_type() == "cuda":  # a CUDA GPU that the helpers offer
    on_gpu = torch.ones(1, device=d2l_gpu.try_gpu())
    print("a tensor on the helpers' first GPU is on", on_gpu.device)
    print("its device == torch.device('cuda'):", on_gpu.device == torch.device("cuda"))
    print("its device.type == 'cuda':         ", on_gpu.device.type == "cuda")
else:
    print("No CUDA GPU: no tensor can be made with device='cuda' here.")

# %% [markdown]
# 在 CUDA 机器上，上面这个单元格依次显示 `cuda:0`、`False` 和 `True`。（它先问 `d2l_gpu`
# 有没有可用的 CUDA GPU，这样在设了文末介绍的 `D2L_DEVICE=cpu` 时，它就不碰 GPU。）
#
# 大多数 PyTorch 代码用一行惯用写法选设备，靠的是 `torch.cuda.is_available()`：
# PyTorch 编译时支持 CUDA（或 ROCm），并且驱动至少找到一块 GPU，它才返回真。

# %%
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
print(device)

# %% [markdown]
# 这种写法只认 CUDA：在 Apple 芯片的 Mac 上，明明有 `mps` GPU，它也会选 CPU。
# `d2l_gpu` 保留了书中简短的函数名，并且看得更全：`gpu(i)` 给出第 i 块 GPU 的名字，
# 类型随当前 PyTorch 所用的加速器而定；机器上没有 GPU 时，它和原书一样给出 CUDA 的名字。

# %%
for name in [d2l_gpu.cpu(), d2l_gpu.gpu(), d2l_gpu.gpu(1)]:
    print(repr(name))

# %% [markdown]
# 从 2.6 版起，原生 PyTorch 也有了不限厂商的选法：`torch.accelerator.current_accelerator()`
# 给出这份 PyTorch 能用的加速器（CUDA、MPS、XPU 等），`torch.accelerator.is_available()`
# 告诉我们有没有。它的回答不带编号，也不理会 `D2L_DEVICE`；后面介绍的 `try_gpu` 把这两样都补上了。
# 两者并排比较：

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
# `torch.cuda.device_count()` 只数 CUDA（以及 ROCm）显卡。较新的 PyTorch 还提供了
# 不限厂商的 `torch.accelerator`，Apple、Intel 的 GPU 也算在内。
# `d2l_gpu.num_gpus()` 回答的是同一个问题，此外还会遵从文末介绍的 `D2L_DEVICE` 设置。
# 在只有 CPU 的机器上，这里打印的是几个 0 和 `None`；插着一块 NVIDIA 卡的机器打印
# `1`、`1`、`1` 和 `cuda`，两块则打印 `2`、`2`、`2` 和 `cuda`。
# （有 GPU 时，上面那个单元格里原生 PyTorch 一行打印 `cuda`，辅助函数打印 `cuda:0`。）
# 数 GPU 只是问驱动有几块卡，不会在卡上占用任何东西。

# %% tags=["nbval-ignore-output"]
print("torch.cuda.device_count():       ", torch.cuda.device_count())
print("torch.accelerator.device_count():", torch.accelerator.device_count())
print("d2l_gpu.num_gpus():              ", d2l_gpu.num_gpus())
print("d2l_gpu.accelerator_type():      ", d2l_gpu.accelerator_type())

# %% [markdown]
# ## 一个进程能看到哪些 GPU
#
# 上面的数字是*这个进程*能用的 GPU，而不是机器上插了几块。环境变量 `CUDA_VISIBLE_DEVICES`
# （由 CUDA 运行时读取；AMD 的 ROCm 用 `HIP_VISIBLE_DEVICES`）列出一个进程能看到的卡，
# 列出的这些卡会从 0 开始重新编号。在有四块 GPU 的机器上，`CUDA_VISIBLE_DEVICES=2,3`
# 只留下两块：物理上的 2 号 GPU 变成 `cuda:0`，3 号变成 `cuda:1`。值为空则隐藏全部 GPU。
# 这个变量只在进程第一次调用 CUDA 时读取一次，所以应当写在启动 Python 或 Jupyter 的命令里
# （`CUDA_VISIBLE_DEVICES=1 python train.py`），而不是写在一个已经在运行的笔记本的某个单元格里。
#
# 在有 CUDA GPU 的机器上，下面的单元格设好这个变量，启动一个新的 Python 子进程，让它自己数。
# 只有一块 GPU 时，变量把它隐藏，子进程一块也数不到；有两块或更多时，
# 只留下最后一块，子进程把它看作 `cuda:0`，名字正是本进程列出的最后一块卡。
# 这个变量里的编号总是指物理上的卡，所以如果本进程启动时已经设了 `CUDA_VISIBLE_DEVICES`
# （集群的作业调度系统常常这样做），单元格传下去的是那份列表里的最后一项。
# 没有 CUDA GPU 时无可隐藏，单元格只说明这一点。

# %% tags=["nbval-ignore-output"]
import os
import subprocess

child = """
import torch
names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
print(len(names), "CUDA GPU(s):", names)
"""
# Ask for names only when the helpers offer a CUDA GPU: D2L_DEVICE=cpu means hands off.
cuda = d2l_gpu.accelerator_type() == "cuda"
names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else []
print("this process sees", len(names), "CUDA GPU(s):", names)
if names:
    # The variable counts physical cards. If this process was itself started with
    # it (cluster schedulers set it), its last card is the last entry listed there.
    given = os.environ.get("HIP_VISIBLE_DEVICES" if torch.version.hip else "CUDA_VISIBLE_DEVICES")
    listed = [entry.strip() for entry in (given or "").split(",") if entry.strip()]
    if len(names) == 1:
        visible = ""
    elif len(listed) >= len(names):
        visible = listed[len(names) - 1]
    else:
        visible = str(len(names) - 1)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": visible, "HIP_VISIBLE_DEVICES": visible}
    run = subprocess.run(
        [sys.executable, "-c", child], env=env, capture_output=True, text=True, check=True
    )
    print(f"a child with CUDA_VISIBLE_DEVICES={visible!r} sees", run.stdout.strip())
else:
    print("No CUDA GPU offered to hide or renumber, so no child process is started here.")

# %% [markdown]
# 在一个进程内部，单写的 `cuda` 指*当前* CUDA 设备，不另行设置就是 `cuda:0`。
# `torch.cuda.set_device(i)` 会永久改掉它，而它自己的文档字符串并不鼓励这样做，
# 建议改用上下文管理器 `torch.cuda.device(i)`（或者 `CUDA_VISIBLE_DEVICES`）。
# 上下文管理器只在它的代码块内改变当前设备，离开时（即使出了错）再恢复原样。
# 在 CUDA 机器上，下面的单元格先打印当前设备 `0`，再打印块内新建的张量所在的、
# 辅助函数给出的最后一块 GPU（两块 GPU 时是 `cuda:1`），最后又打印 `0`；
# 在别的机器上，它说明这里没有当前 CUDA 设备可改。

# %% tags=["nbval-ignore-output"]
if d2l_gpu.accelerator_type() == "cuda":
    last = d2l_gpu.try_all_gpus()[-1]
    print("current CUDA device:", torch.cuda.current_device())
    with torch.cuda.device(last):
        print(f"inside torch.cuda.device({last}), 'cuda' means", torch.ones(1, device="cuda").device)
    print("after the block, the current CUDA device is again", torch.cuda.current_device())
else:
    print("No CUDA GPU offered: there is no current CUDA device to change.")

# %% [markdown]
# ## 要一块未必存在的 GPU
#
# 直接写 `torch.device("cuda:1")` 的代码，在 GPU 少于两块的机器上，
# 一往那里放张量就会出错。下面两个辅助函数可以避开这个问题：
#
# - `try_gpu(i)`：第 i 块 GPU 存在就返回它，否则返回 CPU；
# - `try_all_gpus()`：返回全部 GPU，一块都没有时返回 `[cpu]`，
#   这样遍历它的循环至少总有一个设备可用。
#
# `try_gpu(3)` 要的是第四块 GPU，有这么多卡的机器不多：

# %%
print("try_gpu():  ", d2l_gpu.try_gpu())
print("try_gpu(3): ", d2l_gpu.try_gpu(3))

# %% tags=["nbval-ignore-output"]
d2l_gpu.try_all_gpus()

# %% [markdown]
# 没有 GPU 时，两次 `try_gpu` 都得到 CPU，`try_all_gpus()` 得到 `[device(type='cpu')]`。
# 有一块 GPU 时，结果是 `cuda:0`、`cpu` 和 `[cuda:0]`；有两块时，是 `cuda:0`、`cpu`
# 和 `[cuda:0, cuda:1]`。
#
# GPU 编号必须是从 0 开始的整数；其他值会被拒绝，报错信息会指出哪里不对，
# 而不是悄悄地把 CPU 交还给你：

# %%
try:
    d2l_gpu.try_gpu(-1)
except (TypeError, ValueError) as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# ## 选一次，处处用
#
# 常见的写法是在脚本开头选定设备，之后凡是创建张量的地方都把它传进去。
# PyTorch 从不为了让一次运算能做下去而擅自搬运它的操作数（只有显示或转换数值时，
# 比如 `print`，才会把数据复制到主机），所以这一个变量就决定了所有数据放在哪里。

# %%
device = d2l_gpu.try_gpu()
x = torch.ones(2, 3, device=device)
print("x is on the chosen device:", x.device == device)
print("x is on", x.device)

# %% [markdown]
# ## 在 GPU 机器上走一遍 CPU 的路
#
# 设置 `D2L_DEVICE` 可以限制辅助函数提供的设备，既可以对整次运行生效，
# 也可以像这里一样只管几行。设成 `D2L_DEVICE=cpu` 后，GPU 机器就表现得和没有 GPU 的笔记本电脑一样，
# 用来快速确认代码在没有 GPU 时同样能跑。

# %%
import os

saved = os.environ.get(d2l_gpu.ENV_VAR)
os.environ[d2l_gpu.ENV_VAR] = "cpu"
try:
    print("with D2L_DEVICE=cpu:", d2l_gpu.try_gpu(), d2l_gpu.try_all_gpus(), d2l_gpu.num_gpus())
finally:
    if saved is None:
        del os.environ[d2l_gpu.ENV_VAR]
    else:
        os.environ[d2l_gpu.ENV_VAR] = saved

# %% [markdown]
# ## 本课小结
#
# - `cpu` 指主机，`cuda:0`、`cuda:1`……各指一块 GPU 及其显存，单写的 `cuda` 指当前 GPU；
#   `torch.cuda.device(i)` 可以在一段代码里改变当前 GPU。
# - 数出来的 GPU 是这个进程能看到的那些；`CUDA_VISIBLE_DEVICES` 要在 CUDA 启动之前设好，它隐藏一部分显卡，其余的从 0 重新编号。
# - 原生 PyTorch 用 `torch.accelerator` 选加速器；`try_gpu` 和 `try_all_gpus` 在此之上加了编号、
#   没有 GPU 时退回 CPU，并且遵从 `D2L_DEVICE`。
#
# 下一篇：[03 – 张量与 GPU](03-tensors-and-gpus.ipynb)，把张量放到这些设备上。
