# %% [markdown]
# # GPU 显存：缓存分配器、计数器与显存耗尽
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/08-gpu-memory.ipynb)
#
# 这些课在 GPU 上打印的结果：[notebooks/gpu](../gpu/README.md)。
#
# *拓展内容：本课超出了原书本节的范围。*
#
# **你将学到**
#
# - 在占用显存之前，先算出一个张量要多少字节；
# - PyTorch 的缓存分配器怎样管理 CUDA GPU 的显存，怎样读它的计数器和驱动报告的数字；
# - 以字节为单位确认：`.to(device, copy=True)` 占用新的显存，普通的 `.to(device)` 不占；
# - 用 Adam 训练时，每个参数要占 16 字节；
# - 申请超过设备容量的空间会发生什么，在 GPU 和 CPU 上用安全的方式试一试；
# - 核函数里的错误为什么会指错行，以及 `CUDA_LAUNCH_BLOCKING=1` 的用处。
#
# **你需要**
#
# - 读过 [03 – 张量与 GPU](03-tensors-and-gpus.ipynb)。GPU 不是必需的：没有 GPU 时，需要 GPU 的单元格说明它在 GPU 上会显示什么，并且不调用任何 GPU 接口。
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
# ## 张量还没创建，怎样知道它有多大？
#
# GPU 的显存比服务器的内存小得多，所以创建大张量之前值得先算一算。张量占用的字节数等于元素个数乘以每个元素的字节数。`meta` 张量只有形状和数据类型，没有数据。它在任何机器上都能算出这个数，而且一个字节也不分配：

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
# 十亿个元素的 `float32` 张量占 4 GiB。模型的权重、梯度、优化器状态和激活值，每一项都要再加上这样一笔。
#
# ## GPU 显存里有什么
#
# 在 CUDA GPU 上，PyTorch 不会每创建一个张量就向驱动申请一次显存，那样太慢。它的*缓存分配器*从驱动那里成段地取来大块显存，再切成小块分给张量。分配器的状况由三个数描述，第四个数来自驱动：
#
# - `torch.cuda.memory_allocated()`：存活张量占用的字节数，按分配器的块向上取整（每块至少 512 字节）；
# - `torch.cuda.memory_reserved()`：分配器持有的字节数，包括在用的和留着备用的。释放张量后，它的显存回到这里，而不是还给驱动；
# - `torch.cuda.max_memory_allocated()`：第一个数的峰值，从进程开始或从上一次 `torch.cuda.reset_peak_memory_stats()` 算起；
# - `torch.cuda.mem_get_info()`：驱动报告的空闲显存和总显存，卡上所有进程都算在内。两者之差大致就是 `nvidia-smi` 显示的已用显存。它比分配器持有的多，因为还包括 CUDA 上下文（PyTorch 各个库的 GPU 代码和簿记数据，常有几百 MiB）和其他进程。
#
# `torch.cuda.empty_cache()` 把分配器持有但没在用的显存还给驱动，让别的进程能用。下一个单元格在 CUDA GPU 上跟踪一个 64 MiB 张量从创建到删除的过程。Apple 的 MPS 有自己的两个计数器，在 MPS 上单元格读的是这两个。CPU 没有这样的分配器：CPU 上的张量就在进程的普通内存里，由操作系统统计，所以在 CPU 上这个单元格不调用任何 GPU 接口。
#
# 在 CUDA GPU 上，单元格先用 `torch.cuda.init()` 显式初始化 CUDA。PyTorch 初始化 CUDA 是惰性的：第一次有东西用到它时（通常是第一个放到 GPU 上的张量）才初始化，分配器也是这时才有。在此之前，读计数器的函数都返回 0，`reset_peak_memory_stats(device)` 却会报错 `RuntimeError: Invalid device argument`，因为这个设备还没有分配器（这是在 H200 上运行时发现的）。先显式初始化，顺序就不会错，第一行也能在任何张量出现之前显示卡上的显存占用。

# %% tags=["nbval-ignore-output"]
device = d2l_gpu.try_gpu()
if device.type == "cuda":
    torch.cuda.init()  # 先于任何重置：从这里起，分配器和它的计数器才存在
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
    big = torch.empty(16 * MiB, device=device)  # 16 Mi 个 float32 数值：64 MiB
    show("64 MiB tensor created")
    doubled = big * 2  # 第二个 64 MiB 张量：峰值上升
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
# 在 CUDA GPU 上，这几行会显示：`allocated` 增加 64 MiB，删除张量后降回原处；`reserved` 一直不降，直到调用 `empty_cache()`；`peak` 记下两个张量同时存在的那一刻；驱动报告的数字始终比它们都高得多。一开始还没有任何张量，卡上就已有显存被占用，那是 CUDA 上下文。而且驱动报告的数字回不到起点，调用 `empty_cache()` 之后也回不去。它是在乘法运行时涨上去的，那是本进程在 GPU 上运行的第一个核函数。
#
# 涨的原因只是推断，这个单元格并没有验证它：很可能是 CUDA 在核函数第一次运行时才把它的代码装到卡上（“惰性加载”，较新的 CUDA 版本默认如此），还可能为它预留了工作空间。这样的显存属于上下文，不归 PyTorch 的分配器管，所以 `empty_cache()` 无法把它还给驱动。要检验这个推断，可以在启动 Python 之前设置 `CUDA_MODULE_LOADING=EAGER` 再运行本课：如果推断成立，一开始的上下文会更大，第一个核函数运行时涨得更少。
#
# ## 复制要占显存，精确到字节
#
# [03](03-tensors-and-gpus.ipynb) 说明过：对已经在目标设备上的张量，`.to()` 返回它本身，而 `copy=True` 会新建一个张量。分配器的计数器用字节数说明同一件事：不复制的写法一个字节也不增加，复制则增加整个张量的大小（这里是 4 MiB）。

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
    print(f"No CUDA allocator counter on {device}; 03 showed the same without one.")

# %% [markdown]
# ## 一步训练占多少字节
#
# 训练时每个参数要存四个数：权重、梯度，以及 Adam 的两个移动平均（梯度的一阶矩和二阶矩，下面简称“矩”），每个都是 4 字节的 `float32`。所以还没算激活值，每个参数就要占 16 字节，10 亿个参数就要 16 GB。下面的单元格在一步训练创建这些张量的过程中统计它们的字节数：梯度在第一次 `backward()` 时出现，两个矩在第一次 `optimizer.step()` 时出现。CPU 没有分配器的计数器，所以在 CPU 上单元格只统计这些张量。在 CUDA GPU 上，单元格还打印 `memory_allocated` 和峰值，都从先做的一步之后算起：cuBLAS 在最初几次矩阵乘法时从同一个分配器取走它的工作空间，先做一步并把结果扔掉，这部分就不会混进来。这样计数器应当与统计的张量相符，峰值则比它们多出只存在片刻的部分：激活值和这一步的临时张量。这个单元格还没有在 GPU 上运行过。

# %% tags=["nbval-ignore-output", "key-result"]
batch = torch.randn(64, 1024, device=device)


def two_layers():
    return torch.nn.Sequential(
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024)
    ).to(device)


two_layers()(batch).square().mean().backward()  # 先做一步就扔掉：cuBLAS 在这里准备好工作空间
if device.type == "cuda":
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
model = two_layers()
optimizer = torch.optim.Adam(model.parameters())
weights = list(model.parameters())
count = sum(w.numel() for w in weights)
print(f"{count:,} parameters x 16 bytes = {count * 16 / MiB:.1f} MiB")


def kept(step):
    grads = [w.grad for w in weights if w.grad is not None]
    moments = [s[k] for s in optimizer.state.values() for k in ("exp_avg", "exp_avg_sq")]
    held = sum(t.nbytes for t in weights + grads + moments)
    line = f"{step:<15} weights, gradients and moments: {held / MiB:5.1f} MiB"
    if device.type == "cuda":
        line += f" | allocated {(torch.cuda.memory_allocated(device) - base) / MiB:5.1f} MiB"
        line += f" | peak {(torch.cuda.max_memory_allocated(device) - base) / MiB:5.1f} MiB"
    print(line)


kept("model created")
model(batch).square().mean().backward()
kept("after backward")
optimizer.step()
kept("after step")

# %% [markdown]
# ## 申请的空间超出容量时
#
# 向 CUDA GPU 申请超过其容量的空间，会立刻抛出 `torch.OutOfMemoryError`，进程照常继续：这个错误可以像别的错误一样捕获。Apple 的 MPS 抛出的是普通的 `RuntimeError`。申请超过 Metal 允许的最大缓冲区时（本例就是这样），信息以 `Invalid buffer size` 开头；申请本身不算太大、只是和已分配的显存加起来放不下时，信息是 `MPS backend out of memory`。CPU 同样会立刻拒绝：Linux 默认拒绝超过内存与交换空间之和的申请，PyTorch 随即抛出 `RuntimeError`。`torch.empty` 不写入任何数据，所以允许这种申请的系统（把 overcommit 设为总是允许的 Linux；macOS 也常常允许）给出的只是地址空间，真正写入这些页面时，进程才可能被系统终止。下一个单元格先用 `meta` 张量算好大小，再申请设备容量的两倍（在 CPU 上是机器内存的两倍），并打印完整的报错信息。这个单元格的当前写法还没有在 GPU 上运行过。

# %% tags=["nbval-ignore-output"]
import os

if device.type == "cuda":
    total = torch.cuda.get_device_properties(device).total_memory
elif device.type == "mps":
    total = torch.mps.recommended_max_memory()
elif hasattr(os, "sysconf"):  # Linux、macOS：机器的内存
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
else:
    total = None
if total is None:
    print(f"Not tried on {device}: Python does not tell this system's memory size.")
else:
    too_big = torch.empty(2 * total // 4, device="meta")  # float32：每个元素 4 字节
    print(f"{device} has {total / GiB:.1f} GiB; asking for {too_big.nbytes / GiB:.1f} GiB")
    try:
        granted = torch.empty(too_big.shape, device=device)  # 它的页面一个也没有写入
        print(f"granted: {granted.nbytes / GiB:.1f} GiB of address space, none of it written")
        del granted
    except RuntimeError as error:  # CUDA 抛出它的子类 torch.OutOfMemoryError
        print(f"{type(error).__name__}: {error}")

# %% [markdown]
# 在 CUDA GPU 上，报错信息说明申请了多少、这块卡共有多少、还空闲多少、PyTorch 持有多少，然后给出建议：如果有大量显存已被持有却没有分配出去，设置 `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`（较新的版本写作 `PYTORCH_ALLOC_CONF`）可以减少碎片。真正的程序显存不够时，常见的办法有三个：减小批量大小；少留存活的张量（一个仍连着各自计算图的损失列表是典型的元凶）；换用更小的数据类型。调用 `empty_cache()` 帮不了本身缺显存的进程：缓存里的显存本来就留给它自己重复使用。

# %% [markdown]
# ## 事后才报出的错误
#
# 核函数在 Python 背后运行（见 [04](04-asynchrony-and-transfers.ipynb)），所以核函数内部出的错，比如 `torch.index_select` 或 `nn.Embedding` 查表时索引越界，要到后面的某次调用才报出来。那次调用往往与它毫不相干，回溯信息指向的也是那里。在进程启动之前设置 `CUDA_LAUNCH_BLOCKING=1`，每次启动核函数都要等它运行完，错误就会在引发它的那一行报出。这会让所有运算都变慢，所以只在查错时设置。核函数里的检查失败（“设备端断言”，device-side assert）之后，这个进程的 CUDA 上下文就不能再用了，所以单元格在子进程里执行这次越界索引：一次不设这个变量，一次设置，并打印每次报错指向哪一行。CPU 上的运算是同步执行的，`index_select` 当场就抛出 `IndexError`，所以两次都指向正确的那一行。Apple 的 MPS 没有这样的开关：视 torch 版本而定，那里的越界索引要到后面某次等待时才报出，或者根本不报。这个单元格还没有在 GPU 上运行过。

# %% tags=["nbval-ignore-output"]
import re
import subprocess

CHILD = f"""import torch
x = torch.arange(10.0, device={str(device)!r})
i = torch.tensor([3, 12], device=x.device)
y = torch.index_select(x, 0, i)
print(x.sum().item())
"""
SOURCE = CHILD.splitlines()  # 第 4 行的索引 12 越界；第 5 行与它无关


def blamed(env):
    try:
        child = subprocess.run(
            [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:  # 卡住的子进程被终止，只用一行说明
        return "no answer within 120 s: the child was ended"
    places = list(re.finditer(r'File "<string>", line (\d+)', child.stderr))
    if not places:
        return "no error reported"
    message = re.search(r"^[\w.]+: (.*)$", child.stderr[places[-1].end() :], re.M)
    number = int(places[-1].group(1))
    return f"line {number}, {SOURCE[number - 1]}: {message.group(1) if message else 'error'}"


unset = {k: v for k, v in os.environ.items() if k != "CUDA_LAUNCH_BLOCKING"}
print(f"{'unset':>22}: {blamed(unset)}")
print(f"{'CUDA_LAUNCH_BLOCKING=1':>22}: {blamed({**unset, 'CUDA_LAUNCH_BLOCKING': '1'})}")
if device.type != "cuda":
    print(f"That ran on {device}. A CUDA GPU should report (no GPU has run this cell yet):")
    for name, number in (("unset", 5), ("CUDA_LAUNCH_BLOCKING=1", 4)):
        message = "CUDA error: device-side assert triggered"
        print(f"{name:>22}: line {number}, {SOURCE[number - 1]}: {message}")

# %% [markdown]
# 不设这个变量时，PyTorch 的 CUDA 报错信息本身就给出这条建议：`For debugging consider passing CUDA_LAUNCH_BLOCKING=1`。

# %% [markdown]
# ## 本课小结
#
# - 张量需要的字节数是元素个数乘以每个元素的字节数；`meta` 张量不分配存储就能算出来。
# - 在 CUDA GPU 上，PyTorch 的缓存分配器把释放的显存留下来重复使用：`memory_allocated` 统计存活的张量，`memory_reserved` 统计它持有的显存，`max_memory_allocated` 记录峰值；驱动报告的数字（`mem_get_info`、`nvidia-smi`）还包括 CUDA 上下文和其他进程。
# - 对同一设备调用 `.to(device)` 不增加任何字节；`copy=True` 增加整个张量的大小。
# - 用 Adam 训练时，还没算激活值，每个参数就要占 16 字节（权重、梯度和两个矩）。
# - 申请超过 GPU 容量的显存会立刻失败，抛出程序可以捕获的错误（CUDA 上是 `torch.OutOfMemoryError`，MPS 上是 `RuntimeError`）；按 Linux 的默认设置，向 CPU 申请超过机器内存的空间也是如此。
# - 核函数里的错误要到后面的调用才报出；设置 `CUDA_LAUNCH_BLOCKING=1` 后，它会在引发它的那一行报出。
#
# 下一课：[09 – 给 GPU 计时](09-timing-a-gpu.ipynb)，说明这些课怎样给一个在 Python 背后异步工作的设备计时。
