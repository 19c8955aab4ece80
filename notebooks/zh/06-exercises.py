# %% [markdown]
# # 练习：关于 GPU 的四个问题，用测量来回答
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/06-exercises.ipynb)
#
# **你将学到**
#
# - 矩阵乘法的速度怎样随规模变化，在 CPU 上和在 GPU 上各是什么样，
#   为什么很小的乘法用 GPU 得不到任何好处；
# - 怎样把模型参数从 GPU 上保存下来，并安全地在任何机器上读回；
# - 循环里的 `.item()` 到底贵在哪里，怎样记录数值而不付这笔代价；
# - 在两个设备上同时做两次乘法能省多少时间，只有一个设备或只有 CPU 时，
#   实验能说明什么、不能说明什么。
#
# **你需要**
#
# - 本节前面的笔记本，尤其是 [03 – 张量与 GPU](03-tensors-and-gpus.ipynb)；
#   GPU 不是必需的：每个单元格在 CPU 上都能运行，并说明它在那里测到的是什么。

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
# 书中没有给出这些练习的答案。这里每道题都是 `d2l_gpu.experiments` 里的一个函数，
# 它负责测量，返回由数字组成的普通行；本笔记本调用这些函数，打印表格并画图。
# 所有时间都来自 `d2l_gpu.benchmark`：读时钟之前先等设备做完，先预热，再重复多次，
# 报告中位数，并用四分位距（IQR）表示波动。在 CPU 上规模取得小
# （`quick=True` 让本笔记本运行得快），在 GPU 上取得大。
#
# 你的数字会和这里保存的不同，这是应该的：它们描述的是你的机器。保存的输出
# 来自一台与别人共用的双核小 CPU。这里没有保存任何 GPU 数字；想在 GPU 机器上
# 不开 Jupyter 就得到结果，请在那台机器上运行
# `python -m d2l_gpu bench --json results.json --plot results.png`。

# %%
import matplotlib.pyplot as plt

from d2l_gpu import bench, experiments, plotting

# %% [markdown]
# ## 练习 1：大矩阵乘法与小矩阵乘法
#
# 一次 n x n 的矩阵乘法大约需要 2n³ 次浮点运算，用它除以中位时间，就得到以
# GFLOP/s 计的速率。扫描会在 CPU 上、以及（如果有的话）第一块 GPU 上，分别用
# float32 和 bfloat16 测 PyTorch；在 CPU 上还会用同样的规模测 NumPy。
# “of best” 一列把每个速率与同一组数据中的最高速率相比：那是实测的峰值，
# 不是产品手册上的数字。
# 有 GPU 时，表格下方还有一行，给出从多大的 n 起，GPU 的 float32 乘法在该规模
# 及所有更大的规模上都快过 CPU。

# %% tags=["nbval-ignore-output"]
rows = experiments.matmul_sweep(quick=True)
print(bench.format_matmul(rows, experiments.blas_libraries()))

# %% [markdown]
# 在 CPU 上测了哪些乘法（在每台机器上都一样）：

# %%
print(sorted({(r.backend, r.dtype, r.n) for r in rows if r.device == "cpu"}))

# %% tags=["nbval-ignore-output"]
plotting.plot_matmul(rows)
plt.show()

# %% [markdown]
# **CPU 上看到的。** 速率随 n 增大而上升。16 x 16 的乘法只有大约 8000 次运算，
# 而 Python、分派器以及调用 BLAS 库本身要花几微秒，远远超过这点计算，所以速率很低。
# 从几百开始，每次调用的工作量压过了固定开销，速率逐渐稳定在这些核心的能力附近。
# n 较大时 PyTorch 和 NumPy 的结果接近，因为两者都不亲自做矩阵乘法，而是交给
# 一个经过调优的 BLAS 库（表格写明了是哪个；在这台机器上 PyTorch 用的是 Intel 的
# MKL，NumPy 用的是 OpenBLAS）。在没有原生 bfloat16 指令（AVX512-BF16 或 AMX）的
# CPU 上，bfloat16 比 float32 *慢*得多：数据要先转换，运算其实仍按 float32 进行，
# 所以只测了较少的规模。
#
# 如果你的表格里某些规模不论 n 多大都花大约 16 毫秒，你看到的是线程被唤醒的时间，
# 而不是计算。两次乘法之间，PyTorch 的 OpenMP 工作线程会进入休眠；当这些核心还被
# 别的工作占用时（生成保存输出的那台共用小机器，有几次运行就是这样），唤醒一个
# 线程可能要花掉整整一个调度节拍。在一次这样的运行里，用 `OMP_WAIT_POLICY=active`
# 启动 Python（工作线程空转等待而不休眠），512 x 512 乘法从 16 毫秒降到约 3 毫秒。
# 这不是测量工具造成的：直接用 `torch.utils.benchmark.Timer` 也测到同样的停顿。
#
# **GPU 上看到的。** 同样形状的曲线，只是平移了。GPU 上的每次乘法都要付出一次
# 内核启动，要读结果还得付出一次同步：加起来是几微秒，无论乘法多小。所以 n 很小时
# GPU 并不比 CPU 快，常常还更慢。随着 n 增大，成千上万个 GPU 核心有了足够的活，
# GPU 便超过 CPU（在常见硬件上大约在 n 为一两百到几百之间），之后差距拉大，
# 到 n = 4096 时往往相差一到两个数量级。在较新的 NVIDIA GPU 上，bfloat16 由
# 张量核心执行，比 float32 快好几倍，正好与 CPU 相反。在 CUDA 上，PyTorch 默认让
# float32 乘法保持完整的 float32 精度，除非用
# `torch.set_float32_matmul_precision("high")` 允许 TF32；`bench` 写出的 JSON
# 会记下这个设置。对写代码的启示是：交给 GPU 大块的工作，而不是许多小块。

# %% [markdown]
# ## 练习 2：在 GPU 上读写模型参数
#
# 保存的是 `state_dict`（只有张量，不是 Python 对象本身），读取时加上
# `weights_only=True`：它只接受张量和普通容器，别人给的文件因此无法借机执行代码。
# `map_location` 决定读进来的张量放到哪里。文件写在临时文件夹里，用完即删。

# %%
import tempfile
from pathlib import Path

from torch import nn

device = d2l_gpu.try_gpu()
net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "net.pt"
    torch.save(net.state_dict(), path)
    on_cpu = torch.load(path, map_location="cpu", weights_only=True)
    on_device = torch.load(path, map_location=device, weights_only=True)
clone = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 10))
clone.load_state_dict(on_cpu)
print("loaded onto:", on_cpu["0.weight"].device, "and", on_device["0.weight"].device)
pairs = zip(net.parameters(), clone.parameters(), strict=True)
print("exact:", all(torch.equal(p.cpu(), q) for p, q in pairs))

# %% [markdown]
# `experiments.round_trip` 把同样的事做得更彻底：它记下文件为每个张量保存的位置，
# 用三种方式读回，逐位比较每个张量，并试着在文件所指的设备不存在时读取。

# %%
rt = experiments.round_trip()
print(bench.format_round_trip(rt))

# %%
print("every load exact:", all(load.exact for load in rt.loads))

# %% [markdown]
# **为什么需要 `map_location`。** 文件会记住每个张量原来在哪里：这里是 `cpu`，
# 从 GPU 保存的参数则是 `cuda:0`。不给 `map_location` 时，`torch.load` 会把每个张量
# 放回保存时的位置，所以在 GPU 机器上保存、在没有 CUDA 的笔记本电脑上打开的文件，
# 会报出上面那个错误。这台只有 CPU 的机器上没有这样的文件；我们改为让 `torch.load`
# 把张量放到 `cuda:0`，这走的正是那种文件会触发的同一项检查，打印的也是同一条消息。
# 在 CUDA 机器上，`round_trip` 从 GPU 保存，再在一个看不到 GPU 的子进程里读取，
# 所以那里的消息是真实发生的。解决办法就是上面的第一次读取：
# `map_location="cpu"`（也可以是某个设备，或 `{"cuda:0": "cpu"}` 这样的映射）。
# 先读到 CPU 再移动模型，还能避免检查点很大时在 GPU 上占两份内存。

# %% [markdown]
# ## 练习 3：记录 1000 次乘积的范数
#
# 我们把 1000 对 100 x 100 的矩阵相乘，用三种方式记录每个乘积的 Frobenius 范数：
# (a) 每次乘完调用 `.item()`，把 Python 浮点数追加到列表；(b) 把每个范数写进
# 设备上的一个张量，最后把这个张量一次性复制回主机；(c) 用一次批量 `torch.bmm`
# 写进预先分配好的输出，再一次算出全部范数。在 CUDA 上，每种方式还会在
# `torch.cuda.set_sync_debug_mode("warn")` 下再运行一次：主机每等一次 GPU，
# 它就发出一条警告，我们数这些警告。

# %% tags=["nbval-ignore-output"]
ns = experiments.norms_study(quick=True)
print(bench.format_norms(ns))

# %% [markdown]
# 三种方式记录的数必须相同（在浮点误差之内：批量乘法的加法顺序可能不同）：

# %%
print("norms logged:", len(ns.norms))
print("all three methods agree within 1e-4:", ns.agree)

# %% tags=["nbval-ignore-output"]
plotting.plot_norms(ns)
plt.show()

# %% [markdown]
# **为什么在 CPU 上 (a) 和 (b) 差不多。** PyTorch 在 CPU 上的运算，调用返回时
# 就已经算完了。此时 `.item()` 只是读一个早已在主内存里的数：约一微秒，而乘法要
# 几十微秒。没有待完成的工作队列需要等待，所以也就没有同步可数。(c) 通常快得多，
# 原因不同：一次调用取代了三千次小调用（乘法、范数、写入），每次调用的固定开销
# 只付一次，而且库拿到的一批工作足够大，能用上所有核心。如果机器正忙着别的工作，
# 这些核心未必都空着，(c) 就可能失去优势：练习 1 里见过的那种停顿，发生在一次大调用内部。
#
# **在 GPU 上有什么不同。** 在那里，调用只是把内核*排进队列*，随即返回。在 (a) 中，
# `.item()` 必须等乘法和范数都做完，再把四个字节复制回来：1000 次同步，每次都让
# GPU 闲着等 Python 准备下一次启动，而主机在等待时被阻塞（正如本章所说，还占着
# 解释器）。在 (b) 中，主机一路向前，把 3000 个内核都排进队列；GPU 一个接一个地
# 处理，最后那一次复制是唯一的等待：一次同步。(c) 只需要几次启动。可以预期在 GPU
# 上 (a) 比 (b) 慢好几倍，而 (c) 更快。本章最后的建议由此而来：日志留在设备上，
# 成批地搬回来。

# %% [markdown]
# ## 练习 4：在两块 GPU 上同时做两次乘法
#
# 实验能测什么取决于机器，结果在 `kind` 字段里写明属于哪种情况：
#
# - **两块或更多 GPU：** 在 GPU 0 上先后做两次乘法，对比在两块 GPU 上各做一次、
#   同时进行。内核启动立即返回，所以一个 Python 线程就能让两块 GPU 都忙起来；
#   每次乘法都足够大时，时间应接近减半（加速比接近 2）。
# - **一块 CUDA GPU：** 最接近的真实实验是同一块 GPU 上的两个 CUDA 流。一次大乘法
#   已经占满了 GPU，所以别指望有多少提升：只有当每个内核都让 GPU 有部分空闲时，
#   流才能让它们重叠。这说明的是单个设备上的重叠，不是跨两个设备的扩展。
# - **没有 GPU：** 用两个各限一个核心的 CPU 线程代替两个设备，对比一个这样的线程
#   做完两次乘法。这是 CPU 上的测量，标明是替代品，与 GPU 无关。理想值是 2；两个核心
#   共享内存带宽和缓存，在共用的机器上还有别的工作和它们争抢，通常会让它低一些，
#   而测量的波动（看 IQR）也可能让某一次运行落在 2 的两侧。

# %% tags=["nbval-ignore-output"]
cs = experiments.two_products(quick=True)
print(bench.format_two_products(cs))

# %%
print([row.mode for row in cs.rows])

# %% tags=["nbval-ignore-output"]
plotting.plot_concurrency(cs)
plt.show()

# %% [markdown]
# ## 在终端里运行全部练习
#
# 同样的测量，带进度条、表格、JSON 文件和图，不需要 Jupyter：在远程 GPU 机器上
# 很方便。输出文件只写到你指定的位置。
#
# ```bash
# python -m d2l_gpu bench --quick                  # 先快速看一眼
# python -m d2l_gpu bench --device cuda:0 --json gpu.json --plot gpu.png
# ```
#
# ## 小结
#
# - GPU 在大乘法上占优，在很小的乘法上吃亏：每次调用无论大小都要付出一次启动和一次同步。
# - 保存 `state_dict`，读取时用 `weights_only=True` 和 `map_location`，
#   GPU 上保存的检查点在哪里都能打开。
# - 循环里的 `.item()` 在 CPU 上代价很小，在 GPU 上每一步都是一次同步；
#   把数值留在设备上，一次搬回。
# - 两块 GPU 能同时做两次乘法；单块 GPU 上的多个流、CPU 上的多个线程是另外的实验，
#   报告时也如实标明。
