# %% [markdown]
# # 张量与 GPU：数据放在哪里，搬动它要付出什么
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/03-tensors-and-gpus.ipynb)
#
# **你将学到**
#
# - 怎样查看张量在哪个设备上，为什么一次运算的所有操作数必须在同一个设备上；
# - 怎样直接在 GPU 显存里创建张量，怎样读出 GPU 显存分配器手里有多少内存；
# - 怎样把张量复制到另一个设备，`.to()` 什么时候复制、什么时候不复制；
# - GPU 在 Python 背后异步工作，怎样正确地给它计时、安全地读取它的结果；
# - 搬运数据的代价，用实测说话：复制与它所服务的计算相比、许多次小复制与一次大复制相比、
#   循环里的 `.item()` 与最后一次性取回相比，以及数据加载器里的锁页内存。
#
# **你需要**
#
# - 先读过 [02 – 计算设备](02-computing-devices.ipynb)；GPU 不是必需的，
#   有两块 GPU 时，两卡之间的复制会真的发生。

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
# ## 张量在哪个设备上？
#
# 不加说明的话，新建的张量放在 CPU 上，它的 `device` 属性会如实告诉我们。

# %%
x = torch.tensor([1, 2, 3])
x.device

# %% [markdown]
# ## 一次运算，一个设备
#
# 两个张量相加，总得有谁把两者都读进来，再把和写到某个地方。
# 如果一个在内存里、另一个在 GPU 显存里，PyTorch 就只能去猜在哪里算、结果放在哪里，
# 而无论怎么猜，都意味着一次暗中的复制。所以它干脆拒绝。
# （有一个特意留下的例外：零维的 CPU 张量，实际上就是一个数，可以和 GPU 张量一起运算。）
#
# 这种拒绝在任何机器上都看得到。`meta` 设备只记录张量的形状和类型，不存任何数据，
# 因而没有开销，每个 PyTorch 版本都有。这里让它充当第二个设备。
# 错误被捕获下来，只打印一行，所以这个笔记本也能当作普通脚本运行：

# %%
on_cpu = torch.ones(2, 3)
on_meta = torch.ones(2, 3, device="meta")
try:
    on_cpu + on_meta
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# 报错的措辞和 GPU 用户实际见到的不一样，因为 `meta` 设备用自己的方式检查输入。
# 把一个 CPU 张量和第一块 CUDA GPU 上的张量相加，得到的是这样的报错信息：
#
# > RuntimeError: Expected all tensors to be on the same device, but found at
# > least two devices, cuda:0 and cpu!
#
# 有 GPU 时，下一个单元格会真的犯一次这个错误。没有 GPU 时，找不到第二个设备来混用，
# 单元格就打印上面这条信息，而不是装作出了错。

# %% tags=["nbval-ignore-output"]
gpu = d2l_gpu.try_gpu()
if gpu.type == "cpu":
    print("No GPU here. On a machine with a CUDA GPU this cell prints:")
    print(
        "RuntimeError: Expected all tensors to be on the same device, "
        "but found at least two devices, cuda:0 and cpu!"
    )
else:
    try:
        torch.ones(2, 3) + torch.ones(2, 3, device=gpu)
    except RuntimeError as error:
        print(f"{type(error).__name__}: {str(error).splitlines()[0]}")

# %% [markdown]
# ## 在 GPU 上存储
#
# 把张量放上 GPU，最简单的办法是用 `device` 参数直接在那里创建它。
# 这样元素会被直接写进那块 GPU 的显存，也只占用那块 GPU 的显存。
# 在没有 GPU 的机器上，`try_gpu()` 给出 CPU，`X` 就是个寻常的张量；
# 在 GPU 上，它的打印结果末尾会多出 `device='cuda:0'`。

# %%
X = torch.ones(2, 3, device=d2l_gpu.try_gpu())
X

# %%
print("elements:", X.nelement(), "bytes each:", X.element_size(), "bytes in all:", X.nbytes)

# %% [markdown]
# ### GPU 显存里有什么
#
# 在 CUDA GPU 上，PyTorch 并不是每创建一个张量就向驱动申请一次内存，那样太慢。
# 它的*缓存分配器*从驱动那里成段地取来大块显存，再从中切出小块分给张量。
# 有三个数描述分配器手里的情况，第四个数来自驱动：
#
# - `torch.cuda.memory_allocated()`：存活的张量占用的字节数，按分配器的块向上取整（每块至少 512 字节）；
# - `torch.cuda.memory_reserved()`：分配器持有的字节数，包括正在使用的和留着备用的；
#   释放一个张量，它的内存回到这里，而不是还给驱动；
# - `torch.cuda.max_memory_allocated()`：第一个数自进程开始以来（或自
#   `torch.cuda.reset_peak_memory_stats()` 以来）的峰值；
# - `torch.cuda.mem_get_info()`：驱动眼中这块卡的空闲显存和总显存，卡上所有进程都算在内。
#   两者之差（已用的部分）正是 `nvidia-smi` 统计的数，它比分配器持有的还多：其中包括 CUDA 上下文
#   （PyTorch 各个库的 GPU 代码及其簿记，常常有几百 MiB）和其他进程占用的显存。
#
# `torch.cuda.empty_cache()` 把分配器持有却没在用的显存还给驱动，让别的进程可以使用；
# 它不会让本进程可用的显存变多，仍然存活的张量也照旧占着自己的那份。
# 下一个单元格在 CUDA GPU 上跟踪一个 64 MiB 张量从生到灭的过程。CPU 没有这样的分配器可问：
# CPU 上的张量只是进程普通内存的一部分，由操作系统统计。这时 CUDA 的计数器读出的是 0
# （它们只统计 CUDA GPU 上的显存）。

# %% tags=["nbval-ignore-output"]
MiB = 2**20
cuda = d2l_gpu.try_gpu()
if cuda.type == "cuda":
    torch.cuda.reset_peak_memory_stats(cuda)

    def show(step):
        free, total = torch.cuda.mem_get_info(cuda)
        print(
            f"{step:<26} allocated {torch.cuda.memory_allocated(cuda) / MiB:6.1f} MiB"
            f" | reserved {torch.cuda.memory_reserved(cuda) / MiB:6.1f} MiB"
            f" | peak {torch.cuda.max_memory_allocated(cuda) / MiB:6.1f} MiB"
            f" | in use on the card {(total - free) / MiB:7.1f} MiB"
        )

    show("start")
    big = torch.empty(16 * MiB, device=cuda)  # 16 Mi float32 values: 64 MiB
    show("64 MiB tensor created")
    doubled = big * 2  # a second 64 MiB tensor: the peak rises
    del doubled
    show("a temporary came and went")
    del big
    show("tensor deleted")
    torch.cuda.empty_cache()
    show("after empty_cache()")
else:
    print("No CUDA GPU: tensors live in main memory, counted by the operating system.")
    print("The CUDA counters read:", torch.cuda.memory_allocated(), torch.cuda.memory_reserved())

# %% [markdown]
# 在 CUDA GPU 上，这几行会显示：`allocated` 增加 64 MiB，删除张量后又降回去；
# `reserved` 一直保持，直到调用 `empty_cache()`；`peak` 记住了两个张量同时存在的那一刻；
# 而驱动给出的数字始终比它们都高。（Apple 的 MPS 有自己的计数器：
# `torch.mps.current_allocated_memory()` 和 `torch.mps.driver_allocated_memory()`。）
#
# GPU 的显存比服务器的内存小得多，所以创建大张量之前值得先算一算。
# `meta` 张量能告诉我们某个形状需要多少字节，却一个字节也不分配。
# 向 CUDA GPU 要超过它容量的内存，会立刻抛出 `torch.OutOfMemoryError`；
# Apple 的 MPS 抛出的则是普通的 `RuntimeError`：请求超过 Metal 允许的最大缓冲区时（本例正是如此），
# 信息以“Invalid buffer size”开头；请求本身不算太大、只是和已分配的内存加起来放不下时，
# 信息是“MPS backend out of memory”。
# 在 CPU 上我们不做这个尝试，因为操作系统可能不报错，而是直接结束整个 Jupyter 内核。

# %% tags=["nbval-ignore-output"]
device = X.device
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
    print(f"{device} has {total / 2**30:.1f} GiB; asking for {too_big.nbytes / 2**30:.1f} GiB")
    try:
        torch.empty(too_big.shape, device=device)
    except torch.OutOfMemoryError as error:  # CUDA (and ROCm)
        print(f"{type(error).__name__}: {str(error).splitlines()[0]}")
    except RuntimeError as error:  # MPS reports running out as a plain RuntimeError
        print(f"{type(error).__name__}: {str(error).splitlines()[0]}")

# %% [markdown]
# 接下来原书在第二块 GPU 上创建一个随机张量。`try_gpu(1)` 在有第二块 GPU 时返回它，
# 否则返回 CPU，单元格会说明实际是哪种情况。随机数的值取决于各设备自己的随机数生成器，
# 所以 CPU 上和 GPU 上跑出来的值不同，形状则一样。

# %% tags=["nbval-ignore-output"]
Y = torch.rand(2, 3, device=d2l_gpu.try_gpu(1))
if d2l_gpu.num_gpus() < 2:
    print(f"No second GPU: Y was created on {Y.device} instead.")
Y

# %%
print("Y:", tuple(Y.shape), Y.dtype)

# %% [markdown]
# ## 复制
#
# 假设 `X` 在第一块 GPU 上，`Y` 在第二块上，我们想算 `X + Y`。前面已经看到，
# 直接相加会失败。要先把 `X` 复制到 `Y` 所在的设备，把这份副本叫作 `Z`，再在那里相加。
# 下图画出了有两块 GPU 时的做法（图中标注为英文）：

# %%
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

fig, ax = plt.subplots(figsize=(7.5, 2.8))
ax.set(xlim=(0, 11), ylim=(0, 4))
ax.axis("off")
for left, name in [(0.2, "CPU"), (3.8, "GPU 0"), (7.4, "GPU 1")]:
    outline = FancyBboxPatch((left, 0.3), 3.2, 3.2, boxstyle="round,pad=0.05", fc="whitesmoke")
    ax.add_patch(outline)
    ax.text(left + 1.6, 3.15, name, ha="center", weight="bold")
ax.text(
    1.8, 1.8, "main memory;\nPython queues\nthe work", ha="center", va="center", color="dimgray"
)
places = {"X": (5.0, 2.3), "Y": (8.1, 2.5), "Z": (8.1, 1.1), "Y + Z": (9.9, 1.8)}
for label, (x, y) in places.items():
    box = {"boxstyle": "round", "fc": "lightyellow", "ec": "black"}
    ax.text(x, y, label, ha="center", va="center", size=12, bbox=box)
for start, end, color in [
    ("X", "Z", "tab:red"),
    ("Y", "Y + Z", "tab:blue"),
    ("Z", "Y + Z", "tab:blue"),
]:
    arrow = {"arrowstyle": "-|>", "mutation_scale": 14, "shrinkA": 14, "shrinkB": 18}
    line = FancyArrowPatch(places[start], places[end], color=color, **arrow)
    ax.add_patch(line)
ax.text(5.4, 0.7, "copy: Z = X.to('cuda:1')", ha="center", size=9, color="tab:red")
ax.text(9.9, 2.5, "add", ha="center", size=9, color="tab:blue")
plt.show()

# %% [markdown]
# 有两块 GPU 时，下一个单元格会展示这个错误。只有一块 GPU 时，`Y` 退回到了 CPU 上，
# 于是这个单元格报的是 GPU 与 CPU 混用的错误，下面的复制则是从 GPU 搬回内存。
# 没有 GPU 时，`X` 和 `Y` 都在 CPU 上，也就无从在设备之间复制。

# %% tags=["nbval-ignore-output"]
if X.device == Y.device:
    print(f"X and Y are both on {X.device}: X + Y works as it is.")
else:
    try:
        X + Y
    except RuntimeError as error:
        print(f"{type(error).__name__}: {str(error).splitlines()[0]}")

# %%
Z = X.to(Y.device)
print(X)
print(Z)

# %% [markdown]
# `X` 和 `Z` 的值相同；有两块 GPU 时，它们打印出的设备不同，分别是 `cuda:0` 和 `cuda:1`。
# 在只有一个设备的机器上，`X` 本来就和 `Y` 在一起，`X.to(Y.device)` 什么也不复制，
# `Z` *就是* `X`，同一个对象。下一个单元格说明这里属于哪种情况。

# %% tags=["nbval-ignore-output"]
print(f"X on {X.device}, Z on {Z.device}; Z is X: {Z is X}")

# %% [markdown]
# 无论哪种情况，求和的两个操作数现在都在同一个地方了：

# %%
print("Y + Z equals Y + 1:", torch.equal(Y + Z, Y + 1))

# %% [markdown]
# ### `.to()` 什么时候复制
#
# `Z` 已经和 `Y` 在一起。再要求把它移过去不花任何代价：`.to()` 返回的就是同一个张量对象。
# 加上 `copy=True` 时，即使设备没变，它也会分配新内存并复制每一个元素。
# 原书的 Java 接口用一个布尔参数区分这两种情况；PyTorch 里的 `Z.cuda(1)` 相当于不复制的写法。

# %%
W = Z.to(Z.device, copy=True)
print("Z.to(Z.device) is Z:", Z.to(Z.device) is Z)
print("W is Z:             ", W is Z)
print("same memory:        ", W.data_ptr() == Z.data_ptr())
print("same values:        ", torch.equal(W, Z))

# %% [markdown]
# 在 GPU 上，分配器的计数器会以字节数显示两者的差别：不复制的写法一个字节也不增加，
# 复制则增加整个张量的大小。

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
    print("No CUDA GPU, so no allocator counter to read; data_ptr() above shows the same.")

# %% [markdown]
# ## GPU 在 Python 背后工作
#
# Python 对 GPU 张量调用 `torch.matmul` 时，PyTorch 检查参数，把一个*核函数*
# （在 GPU 上运行的程序）放进 GPU 的队列，然后立即返回，远在 GPU 算完之前。
# Python 继续往前跑，GPU 则按队列依次干活，好比打电话预订咖啡、稍后再去取。
# 结果张量马上就有了，它的值要等 GPU 做到那一步才会填进去。
#
# 这让不加同步的计时出错：量到的只是把工作*排进队列*花的时间。下面的单元格把十次矩阵乘法排进队列，
# 读两次时钟：一次在循环刚结束时，一次在 `d2l_gpu.synchronize(device)`（在 CUDA 上即
# `torch.cuda.synchronize()`）之后，它会一直等到队列清空。在 CPU 上，运算就在每次调用里完成，
# 所以两次读数一致；在 GPU 上，第一次读数远小于第二次。

# %% tags=["nbval-ignore-output"]
import time

device = d2l_gpu.try_gpu()
n = 256 if device.type == "cpu" else 4096  # big enough to keep a GPU busy for a while
a = torch.randn(n, n, device=device)
torch.matmul(a, a)  # warm-up: the first call loads the GPU's code
d2l_gpu.synchronize(device)

start = time.perf_counter()
for _ in range(10):
    c = torch.matmul(a, a)
queued = time.perf_counter() - start  # Python is done: the work is queued
d2l_gpu.synchronize(device)
finished = time.perf_counter() - start  # the device is done too
print(f"10 products of {n}x{n} matrices on {device}:")
print(f"  clock read when the loop returned: {queued * 1e3:8.2f} ms")
print(f"  clock read after synchronizing:    {finished * 1e3:8.2f} ms")
print(f"  the second reading is {finished / queued:.1f}x the first")

# %% [markdown]
# CUDA GPU 还能自己计时。`torch.cuda.Event` 是放进队列的一个标记；GPU 经过两个标记之后，
# `elapsed_time` 给出两者之间以毫秒计的时间。它用的是 GPU 自己的时钟，Python 自身的开销不计在内。

# %% tags=["nbval-ignore-output"]
if device.type == "cuda":
    begin = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    # Plain record() marks the current GPU's queue; name the queue the products
    # go to, which differs when D2L_DEVICE picks a GPU other than cuda:0.
    queue = torch.cuda.current_stream(device)
    begin.record(queue)
    for _ in range(10):
        c = torch.matmul(a, a)
    end.record(queue)
    end.synchronize()  # wait until the GPU has passed the second marker
    print(f"CUDA events: 10 products took {begin.elapsed_time(end):.2f} ms on the GPU")
else:
    print(f"CUDA events need a CUDA GPU; on {device} the synchronized clock above is the answer.")

# %% [markdown]
# 同一个队列也解释了一类令人困惑的报错。当某个核函数出错，比如 GPU 里下标越界，
# Python 通常早已往前走了，错误会在后面某个需要等待 GPU 的地方（一次 `print`、一次 `.item()`）
# 才冒出来，离出错的真正位置很远。在 Python 启动之前设置环境变量 `CUDA_LAUNCH_BLOCKING=1`，
# 每次启动核函数都会等它执行完，报错就会指向真正出错的那一行。它会让一切变慢：
# 只在查找错误时使用，不要用来训练。
#
# ## 旁注，实测
#
# 人们买 GPU 是为了速度，而速度恰恰容易丢在设备之间的数据搬运上。
# 这就是 PyTorch 从不背着我们复制的原因：崩溃能指出问题所在，
# 悄悄的复制只会让程序变慢，还不告诉你为什么。有三点值得注意。
#
# - 与它所服务的运算相比，传输很慢。内存和 GPU 之间靠总线（PCIe）通信，
#   每秒只能搬几十 GB，而 GPU 读自己的显存，每秒可达几百 GB 到数 TB，视显卡而定。
# - 每次传输都有固定开销，与大小无关。许多次小传输远不如一次大传输，
#   同理，许多个小运算也比不上一次完成同样工作的大运算。
# - 有些操作会让 CPU 停下来等。把结果读回来（`.item()`、`print`、`.tolist()`、`.cpu()`）
#   就像站在柜台前一直等到咖啡做好：这期间什么新任务也排不进队列，GPU 随后可能就闲着了。
#
# 下面的单元格用 `d2l_gpu.benchmark` 来测量这些效应：它先等设备完成工作再读时钟，
# 报告时间的中位数和离散程度（四分位距 IQR）。**这些数字在这里意味着什么：**
# 本笔记本保存的输出来自一台只有 CPU 的机器，所谓“传输”只是内存里的一次复制。
# 每次调用的固定开销和 `.item()` 的代价依然看得出来，但复制并不比计算慢。
# 换到 GPU 上，同样的单元格比较的是总线与 GPU，复制通常比它所服务的计算还要费时。
# 在 GPU 上运行本笔记本，就能看到你自己的数字。测量期间 PyTorch 只用一个 CPU 线程，
# 免得在一台小而忙的共享机器上，计时结果取决于第二个核多快被唤醒；GPU 自身的工作不受这个设置影响。

# %% tags=["nbval-ignore-output"]
results = {}


def measure(label, fn):
    """Time fn on the chosen device, print the result and keep it for the plot."""
    results[label] = d2l_gpu.benchmark(
        fn, device=device, min_run_time=0.1, num_threads=1, label=label
    )
    print(results[label])


host = torch.randn(512, 512)
on_device = host.to(device)
landing = torch.empty_like(on_device)  # where each copy lands, allocated once
out = torch.empty_like(on_device)
print(f"copying 1 MiB from the host to {device}, against work done with it on {device}:")
measure("copy 1 MiB to device", lambda: landing.copy_(host))
measure("x * 2 on device", lambda: torch.mul(on_device, 2, out=out))
measure("x @ x on device", lambda: torch.matmul(on_device, on_device, out=out))

# %% [markdown]
# 每次复制都落进事先分配好的内存，每个运算也都写进现成的输出（`out=`），
# 这样时钟量到的是传输和运算本身，而不是内存分配器。逐元素的 `x * 2` 读写的内存
# 与复制搬运的一样多，矩阵乘法则对每个元素做大约一千次运算。在 GPU 上，复制多半比这两者都慢。
#
# 接着，把同样的 1 MB 拆成 256 块 4 KB 逐块复制，再与整块复制一次相比：

# %% tags=["nbval-ignore-output"]
pieces = [torch.randn(1024) for _ in range(256)]
whole = torch.cat(pieces)
landings = [torch.empty(1024, device=device) for _ in pieces]
whole_landing = torch.empty(whole.shape, device=device)
measure("256 copies of 4 KiB", lambda: [d.copy_(p) for d, p in zip(landings, pieces, strict=True)])
measure("1 copy of 1 MiB", lambda: whole_landing.copy_(whole))
ratio = results["256 copies of 4 KiB"].median / results["1 copy of 1 MiB"].median
print(f"many small copies take {ratio:.1f}x as long as one large copy of the same data")

# %% [markdown]
# 一个一个地读回数值，是同一个错误反方向的版本。训练循环里每一步都调用 `loss.item()`，
# 就会让 CPU 每一步都等 GPU 一次。下面比较用 `.item()` 逐个读取 256 个值，
# 与用一次 `.tolist()` 全部取回：

# %% tags=["nbval-ignore-output"]
values = torch.rand(256, device=device)
measure("256 x .item()", lambda: [v.item() for v in values])
measure("1 x .tolist()", lambda: values.tolist())
ratio = results["256 x .item()"].median / results["1 x .tolist()"].median
print(f".item() in a loop takes {ratio:.0f}x as long as one transfer at the end")

# %% [markdown]
# 即使在 CPU 上，循环也慢得多：每一步都要创建一个张量，再经过 PyTorch 的分发器
# （为每次调用挑选合适实现的那一层）。在 GPU 上，每次 `.item()` 还要等 GPU 一次，
# 再通过总线做一次极小的复制，差距只会更大。
#
# 下图把七个中位数并排画出，横轴取对数，误差棒表示第一到第三四分位数之间的范围。

# %% tags=["nbval-ignore-output"]
labels = list(results)
medians = [results[k].median * 1e6 for k in labels]
spread = [
    [(results[k].median - results[k].q1) * 1e6 for k in labels],
    [(results[k].q3 - results[k].median) * 1e6 for k in labels],
]
fig, ax = plt.subplots(figsize=(6, 2.6))
ax.barh(labels, medians, xerr=spread, color="tab:blue", capsize=3)
ax.set_xscale("log")
ax.set_xlabel(f"microseconds per call on {device} (median, IQR)")
ax.invert_yaxis()
fig.tight_layout()
plt.show()

# %% [markdown]
# ### 打印和 NumPy 都要经过内存
#
# `print` 需要数值位于内存中，所以对 GPU 张量，它会不声不响地先把数据复制到主机。
# `.numpy()` 则不会：NumPy 数组只能放在内存里，对 GPU 张量调用 `.numpy()` 会抛出
# `TypeError`，要求先调用 `.cpu()`。用 `meta` 张量，在任何机器上都能看到同样的拒绝：

# %%
try:
    torch.ones(2, device="meta").numpy()
except TypeError as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# 有三个调用能把任何设备上的数值取回主机：`.cpu()` 得到一个 CPU 张量（`.numpy()` 随后就接受它），
# `.tolist()` 得到 Python 数值，`.item()` 得到单元素张量里的那一个数。

# %%
t = torch.arange(4.0, device=device)
print(t.cpu().numpy(), t.tolist(), t[-1].item())

# %% [markdown]
# 对已经在 CPU 上的张量，`.cpu()` 返回它本身，`.numpy()` 与它共用内存，什么也没复制。
# 对 GPU 张量，`.cpu()` 则是一次实实在在的复制，数据写入新的主机内存。
# 下一个单元格打印这里发生的是哪一种。

# %% tags=["nbval-ignore-output"]
on_host = t.cpu()
print(f"t is on {t.device}; t.cpu() is t: {on_host is t}")
print("NumPy array shares t's memory:", on_host.numpy().ctypes.data == t.data_ptr())

# %% [markdown]
# ### 比原书多走一步：锁页内存与 `non_blocking`
#
# 从主机到 CUDA GPU 的复制由 GPU 的复制引擎完成，它只能读取锁页（pinned）内存。
# 如果数据在普通内存里，就得先经过一块锁页的中转缓冲区，CPU 还要等复制结束。
# 如果事先把内存锁页（`tensor.pin_memory()`，或在 `DataLoader` 里设 `pin_memory=True`），
# 复制就能直接走总线；再加上 `non_blocking=True`，复制只是排进队列，
# Python 可以在数据传输的同时继续干活。之后在 GPU 上的运算会自动等它完成；
# 读时钟之前则必须先同步，`d2l_gpu.benchmark` 会替你做。锁页内存需要 CUDA（或类似的）GPU；
# 没有的话，PyTorch 会直说。

# %% tags=["nbval-ignore-output"]
batch = torch.randn(2048, 1024)  # 8 MiB
try:
    pinned = batch.pin_memory()
except RuntimeError as error:
    print(f"pin_memory() is not available here: {type(error).__name__}: {error}")
else:
    landing = torch.empty(batch.shape, device=device)
    print(f"copying 8 MiB to {device}:")
    measure("from ordinary memory", lambda: landing.copy_(batch))
    measure("from pinned memory", lambda: landing.copy_(pinned, non_blocking=True))

# %% [markdown]
# 在 CUDA GPU 上，从锁页内存复制通常更快；它真正的好处在于，
# 当前这批数据还在路上时，CPU 就可以着手准备下一批。
#
# 反方向藏着一个陷阱。用 `non_blocking=True` 从 GPU 复制到锁页的主机内存，同样只是排进队列，
# 可这回读结果的是 *CPU*，没有任何东西让 CPU 等这次复制完成。在同步之前读取主机上的张量，
# 读到的可能是复制还没来得及填写的内存。（`.to("cpu", non_blocking=True)` 也一样，
# 它会替你分配锁页的结果张量。）下面把一个全 1 矩阵的乘法排进队列，乘积的每个元素都等于 `n`，
# 再不加等待地复制回主机；第一个元素读两次，一次读得太早，一次在同步之后。
# 在 CPU 上两次都对，因为没有任何东西在排队；在 CUDA GPU 上，太早的那次通常读到 `0.0` 或一个过时的值。

# %% tags=["nbval-ignore-output"]
ones = torch.ones(n, n, device=device)
product = ones @ ones  # every element equals n; on a GPU this is only queued
result = torch.empty(product.shape, pin_memory=device.type == "cuda")
result.copy_(product, non_blocking=True)  # on a GPU: queued behind the product
too_early = result[0, 0].item()  # result is a CPU tensor: this does not wait
d2l_gpu.synchronize(device)
print(f"read before synchronizing: {too_early} (expected {float(n)})")
print(f"read after synchronizing:  {result[0, 0].item()}")

# %% [markdown]
# 设了 `pin_memory=True` 的 `DataLoader` 交出的每一批数据都已在锁页内存里，可以直接用
# `non_blocking=True` 复制。下面在一个小数据集上跑一个简短的循环，只在有 CUDA GPU
# 可以复制过去时才要求锁页（否则 PyTorch 会警告说无法锁页）。`num_workers=0`
# 让数据在本进程里加载，使例子保持简单；真正的训练还会用上工作进程。

# %%
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(512, 32), torch.randn(512, 1))
loader = DataLoader(data, batch_size=64, pin_memory=device.type == "cuda", num_workers=0)
weights = torch.zeros(32, 1, device=device)
total = torch.zeros((), device=device)
for features, targets in loader:
    pinned_as_asked = features.is_pinned() == loader.pin_memory
    features = features.to(device, non_blocking=True)
    targets = targets.to(device, non_blocking=True)
    total += ((features @ weights - targets) ** 2).mean()  # queued, not waited for
print(f"{len(loader)} batches, each pinned as asked: {pinned_as_asked}")
print(f"mean loss of the zero model: {total.item() / len(loader):.2f}")  # one wait, at the end

# %% [markdown]
# 下一篇：[06 – 神经网络与 GPU](06-neural-networks-and-gpus.ipynb)，
# 把整个模型放到设备上。
