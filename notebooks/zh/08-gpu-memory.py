# %% [markdown]
# # GPU 显存：缓存分配器、计数器与显存耗尽
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/04-gpu-memory.ipynb)
#
# 在 NVIDIA H200 上运行的结果：暂缺，修正后的这一课还需要在 GPU 上运行一次。
#
# **你将学到**
#
# - 在占用任何显存之前，先算出一个张量需要多少字节；
# - PyTorch 的缓存分配器怎样管理 CUDA GPU 的显存，怎样读它的计数器和驱动给出的数字；
# - 以字节为单位看到：`.to(device, copy=True)` 占用新的显存，普通的 `.to(device)` 不占；
# - 向 GPU 要比它拥有的还多的显存会怎样，用稳妥的方式试一试。
#
# **你需要**
#
# - 先读过 [03 – 张量与 GPU](03-tensors-and-gpus.ipynb)。GPU 不是必需的：
#   没有 GPU 时，每个单元格会说明它本来会显示什么，而且不调用任何 GPU 接口。
#
# 代码单元格的输出都是英文的，中文笔记本也一样。

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
# ## 张量还没创建，怎样知道它有多大？
#
# GPU 的显存比服务器的内存小得多，所以创建大张量之前值得先算一算。
# 一个张量需要的字节数等于元素个数乘以其类型每个元素的字节数。
# `meta` 张量只有形状和类型，没有数据，它能在任何机器上算出这个数，却一个字节也不分配：

# %%
MiB, GiB = 2**20, 2**30
for shape, dtype in [
    ((4096, 4096), torch.float32),
    ((4096, 4096), torch.bfloat16),
    ((64, 3, 224, 224), torch.float32),
    ((2**30,), torch.float32),
]:
    planned = torch.empty(shape, dtype=dtype, device="meta")
    print(f"{str(shape):>18} {str(dtype):>15}: {planned.nbytes / MiB:9.1f} MiB")

# %% [markdown]
# 十亿个元素的 `float32` 张量要占 4 GiB；模型的权重、梯度、优化器状态和激活值，各自都会加上这样一笔。
#
# ## GPU 显存里有什么
#
# 在 CUDA GPU 上，PyTorch 并不是每创建一个张量就向驱动申请一次显存，那样太慢。
# 它的*缓存分配器*从驱动那里成段地取来大块显存，再从中切出小块分给张量。
# 有三个数描述分配器手里的情况，第四个数来自驱动：
#
# - `torch.cuda.memory_allocated()`：存活的张量占用的字节数，按分配器的块向上取整（每块至少 512 字节）；
# - `torch.cuda.memory_reserved()`：分配器持有的字节数，包括正在使用的和留着备用的；
#   释放一个张量，它的显存回到这里，而不是还给驱动；
# - `torch.cuda.max_memory_allocated()`：第一个数自进程开始以来（或自
#   `torch.cuda.reset_peak_memory_stats()` 以来）的峰值；
# - `torch.cuda.mem_get_info()`：驱动眼中这块卡的空闲显存和总显存，卡上所有进程都算在内。
#   两者之差（已用的部分）正是 `nvidia-smi` 统计的数，它比分配器持有的还多：其中包括 CUDA 上下文
#   （PyTorch 各个库的 GPU 代码及其簿记，常常有几百 MiB）和其他进程占用的显存。
#
# `torch.cuda.empty_cache()` 把分配器持有却没在用的显存还给驱动，让别的进程可以使用；
# 它不会让本进程可用的显存变多，仍然存活的张量也照旧占着自己的那份。
# 下一个单元格在 CUDA GPU 上跟踪一个 64 MiB 张量从生到灭的过程。Apple 的 MPS 有自己的两个计数器，
# 在那里单元格读的是它们。CPU 没有这样的分配器可问：CPU 上的张量只是进程普通内存的一部分，
# 由操作系统统计，所以在 CPU 上这个单元格不调用任何 GPU 接口。
#
# 在 CUDA GPU 上，单元格先用 `torch.cuda.init()` 亲手启动 CUDA。PyTorch 启动 CUDA 是“惰性”的：
# 等到第一次有东西需要它时（通常是第一个放上 GPU 的张量）才启动，分配器也到那时才存在。
# 在此之前，读计数器的函数都返回 0，`reset_peak_memory_stats(device)` 却会报错停下：
# `RuntimeError: Invalid device argument`，因为那个设备还没有分配器。
# 主动启动 CUDA 让这个先后顺序一目了然，也让第一行在任何张量出现之前就显示出卡上的显存占用。

# %% tags=["nbval-ignore-output"]
device = d2l_gpu.try_gpu()
if device.type == "cuda":
    torch.cuda.init()  # start CUDA: its allocator, and so its counters, exist from here
    torch.cuda.reset_peak_memory_stats(device)

    def show(step):
        free, total = torch.cuda.mem_get_info(device)
        print(
            f"{step:<26} allocated {torch.cuda.memory_allocated(device) / MiB:6.1f} MiB"
            f" | reserved {torch.cuda.memory_reserved(device) / MiB:6.1f} MiB"
            f" | peak {torch.cuda.max_memory_allocated(device) / MiB:6.1f} MiB"
            f" | in use on the card {(total - free) / MiB:7.1f} MiB"
        )

elif device.type == "mps":

    def show(step):
        print(
            f"{step:<26} allocated {torch.mps.current_allocated_memory() / MiB:6.1f} MiB"
            f" | held by the driver {torch.mps.driver_allocated_memory() / MiB:7.1f} MiB"
        )

if device.type in ("cuda", "mps"):
    show("start")
    big = torch.empty(16 * MiB, device=device)  # 16 Mi float32 values: 64 MiB
    show("64 MiB tensor created")
    doubled = big * 2  # a second 64 MiB tensor: the peak rises
    del doubled
    show("a temporary came and went")
    del big
    show("tensor deleted")
    if device.type == "cuda":
        torch.cuda.empty_cache()
        show("after empty_cache()")
else:
    print(f"The helpers chose {device}: tensors live in main memory, counted by the OS.")
    print("No GPU allocator to read here, and no GPU API is called.")

# %% [markdown]
# 在 CUDA GPU 上，这几行会显示：`allocated` 增加 64 MiB，删除张量后又降回去；
# `reserved` 一直保持，直到调用 `empty_cache()`；`peak` 记住了两个张量同时存在的那一刻；
# 而驱动给出的数字始终比它们都高。一开始还没有任何张量，卡上就已经有显存被占用了：那是 CUDA 上下文。
# 驱动给出的数字也回不到起点，调用 `empty_cache()` 之后也回不去。它是在乘法运行时涨上去的，
# 那是本进程在 GPU 上运行的第一个核函数：CUDA 在一个核函数第一次运行时才把它的代码装到卡上
# （“惰性加载”，较新的 CUDA 版本默认如此，PyTorch 也会要求较旧的版本这样做），
# 还可能为运行它预留工作空间。这部分显存属于上下文，不归 PyTorch 的分配器管，
# 所以 `empty_cache()` 还不回去；每多一种核函数它就可能再涨一些，直到进程结束才释放。
#
# ## 复制要占显存，精确到字节
#
# [03](03-tensors-and-gpus.ipynb) 用 `data_ptr()` 说明了：对已经在目标设备上的张量，
# `.to()` 返回它本身，而 `copy=True` 会新建一个张量。分配器的计数器以字节数显示同一件事：
# 不复制的写法一个字节也不增加，复制则增加整个张量的大小（这里是 4 MiB）。

# %% tags=["nbval-ignore-output"]
if device.type == "cuda":
    big = torch.ones(1024, 1024, device=device)  # 4 MiB
    before = torch.cuda.memory_allocated(device)
    same = big.to(device)
    after_same = torch.cuda.memory_allocated(device)
    fresh = big.to(device, copy=True)
    after_copy = torch.cuda.memory_allocated(device)
    print(f".to(device):            +{after_same - before} bytes")
    print(f".to(device, copy=True): +{after_copy - after_same} bytes")
    del big, same, fresh
else:
    print(f"No CUDA allocator counter on {device}; data_ptr() in 03 showed the same.")

# %% [markdown]
# ## 要得太多
#
# 向 CUDA GPU 要超过它容量的显存，会立刻抛出 `torch.OutOfMemoryError`，而进程照常继续：
# 这个错误可以像别的错误一样捕获。Apple 的 MPS 抛出的则是普通的 `RuntimeError`：
# 请求超过 Metal 允许的最大缓冲区时（本例正是如此），信息以“Invalid buffer size”开头；
# 请求本身不算太大、只是和已分配的显存加起来放不下时，信息是“MPS backend out of memory”。
# 下一个单元格先用 `meta` 张量算好大小，再要这块卡两倍的显存。
# 在 CPU 上我们不做这个尝试，因为操作系统可能不报错，而是直接结束整个 Jupyter 内核。

# %% tags=["nbval-ignore-output"]
if device.type == "cuda":
    total = torch.cuda.get_device_properties(device).total_memory
elif device.type == "mps":
    total = torch.mps.recommended_max_memory()
else:
    total = None
if total is None:
    print(f"Not tried on {device}: the operating system could kill the kernel instead.")
else:
    too_big = torch.empty(2 * total // 4, device="meta")  # float32: 4 bytes per element
    print(f"{device} has {total / GiB:.1f} GiB; asking for {too_big.nbytes / GiB:.1f} GiB")
    try:
        torch.empty(too_big.shape, device=device)
    except torch.OutOfMemoryError as error:  # CUDA (and ROCm)
        print(f"{type(error).__name__}: {str(error).splitlines()[0]}")
    except RuntimeError as error:  # MPS reports running out as a plain RuntimeError
        print(f"{type(error).__name__}: {str(error).splitlines()[0]}")

# %% [markdown]
# 在 CUDA GPU 上，报错信息会说明要了多少、这块卡总共有多少、还空闲多少，以及 PyTorch 持有多少。
# 真正的程序显存不够时，常见的办法是减小批量、少留一些存活的张量
# （一个还连着各自计算图的损失列表就是典型的元凶），或者换用更小的数值类型。
# 调用 `empty_cache()` 帮不了本身就缺显存的进程：缓存里的显存本来就归它自己重复使用。

# %% [markdown]
# ## 本课小结
#
# - 一个张量需要的字节数是元素个数乘以每个元素的字节数；`meta` 张量不分配任何存储就能算出来。
# - 在 CUDA GPU 上，PyTorch 的缓存分配器把释放的显存留着重复使用：
#   `memory_allocated` 统计存活的张量，`memory_reserved` 统计它持有的显存，
#   `max_memory_allocated` 记录峰值，而驱动给出的数字（`mem_get_info`、`nvidia-smi`）
#   还包括 CUDA 上下文和其他进程。
# - 对同一设备调用 `.to(device)` 不增加任何字节；`copy=True` 增加整个张量的大小。
# - 要的比 GPU 拥有的还多，会立刻失败，抛出程序可以捕获的错误（CUDA 上是
#   `torch.OutOfMemoryError`，MPS 上是 `RuntimeError`）。
#
# 下一篇：[05 – 异步与传输](05-asynchrony-and-transfers.ipynb)，正确地给 GPU 计时，
# 并测量搬运数据的代价。
