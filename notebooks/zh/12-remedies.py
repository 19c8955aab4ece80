# %% [markdown]
# # 对策：降低精度、核函数融合与减少启动
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/12-remedies.ipynb)
#
# 这些课在 GPU 上打印的结果：[notebooks/gpu](../gpu/README.md)。
#
# *拓展内容：本课超出了原书本节的范围。*
#
# **你将学到**
#
# - 三种瓶颈各自的对策，每一种都和它所替换的代码并排实测：算力靠降低精度；
#   显存带宽靠让每个数少占字节、靠核函数融合；开销靠减少启动、合并成批量运算；
# - 哪种 GPU 该用哪种低精度：从 A100 起用 bfloat16，Colab 常分配的 T4 等较旧的显卡用 float16；
# - `torch.compile` 融合了什么，第一次调用要付出多少时间，以及在无法编译的机器上会看到什么。
#
# **你需要**
#
# - 先读过 [11 – 三种瓶颈](11-three-limits.ipynb)，了解三种瓶颈、上限表和判断方法；
#   [09 – 给 GPU 计时](09-timing-a-gpu.ipynb) 讲了 `benchmark` 和 `compare`。
#   GPU 不是必需的：在 CPU 上每个单元格都能运行，文字会说明 GPU 上会看到什么。
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
# ## 对策要对准瓶颈
#
# [11](11-three-limits.ipynb) 把时间换算成速率，再和设备的上限相比，判断是哪一种瓶颈。
# 对策取决于判断的结果：计算受限的工作需要更快的运算，带宽受限的工作需要少搬运字节，
# 受开销拖累的工作需要减少经过主机的次数。对策用错了瓶颈，收效甚微。
#
# ## 算力：降低精度
#
# 张量核心做 16 位的乘法比 float32 快很多倍；快多少，见 11 的上限表中 float16 / bfloat16 一列。
# bfloat16 的范围与 float32 相同，但只有 8 个有效二进制位；
# float16 有 11 个有效二进制位，但超过 65,504 就会溢出。该用哪一种，取决于显卡。
# 从 A100 起（CUDA 计算能力 8.0），张量核心两种都支持。更早的显卡，包括 Colab 常分配的 T4 和 V100，
# 张量核心只支持 float16：PyTorch 在这些显卡上仍然接受 bfloat16，但算得并不比 float32 快，往往更慢。
# Apple GPU 也用 float16，这是 Metal 一直支持的半精度格式。下面的单元格按设备选择格式。

# %% tags=["nbval-ignore-output"]
device = d2l_gpu.try_gpu()
before_ampere = device.type == "cuda" and torch.cuda.get_device_capability(device) < (8, 0)
low = torch.float16 if before_ampere or device.type == "mps" else torch.bfloat16
low_name = str(low).removeprefix("torch.")
print(f"on {device}, the lower precision is {low_name}")

# %% [markdown]
# 下面的单元格给一次大的 float32 矩阵乘法计时，再给同样的乘法换用低精度后计时，并打印两者的速率。
# 输入只在计时的调用之外转换一次数据类型，所以测得的是乘法本身的速率，可以直接和 11 的上限表对照，
# 达到峰值的 80% 左右就已经到头了。
# 在模型里，数据类型转换由 `torch.autocast` 完成：在它的代码块里，矩阵乘法用低精度计算，其余仍是 float32。
# 它每次调用都要转换输入（层的权重在每个代码块里只转换一次），这本身也要读写显存；
# 最后一行显示 autocast 返回的数据类型。
#
# 在 CUDA GPU 上，单元格还允许 float32 乘法使用 TF32（`torch.set_float32_matmul_precision("high")`）：
# 输入舍入到 11 个有效二进制位，累加仍按 float32。A100 之前的显卡没有 TF32，这些乘法仍按普通的 float32 计算。
# 在 CPU 上，结果取决于芯片：有 bfloat16 运算单元（AMX、AVX-512 BF16）的会变快，
# 许多别的芯片反而变慢，有的芯片上，谁快谁慢每次运行都可能不同。
# 这个单元格和本课所有 CUDA 分支都还没有在 GPU 上运行过。

# %% tags=["nbval-ignore-output", "key-result"]
n = 512 if device.type == "cpu" else 8192
a = torch.randn(n, n, device=device)
c = torch.empty_like(a)
a_low = a.to(low)  # 只转换一次，放在计时的调用之外
c_low = torch.empty_like(a_low)
flop = 2 * n**3


def float32_product():
    torch.matmul(a, a, out=c)


def low_product():
    torch.matmul(a_low, a_low, out=c_low)


precision = d2l_gpu.compare(float32_product, low_product, labels=("float32", low_name), device=device)
print(precision)
for m in (precision.first, precision.second):
    print(f"  {m.label} product: {flop / m.median / 1e12:.3g} TFLOP/s")
if device.type == "cuda":
    torch.set_float32_matmul_precision("high")  # float32 乘法可以使用 TF32
    tf32 = d2l_gpu.benchmark(float32_product, device=device)
    torch.set_float32_matmul_precision("highest")  # 恢复默认值
    print(f"  float32 product with TF32 allowed: {flop / tf32.median / 1e12:.3g} TFLOP/s")
with torch.autocast(device_type=device.type, dtype=low):
    print("under autocast, a @ a comes out in", (a @ a).dtype)

# %% [markdown]
# 降低精度会让结果略有变化；深度学习通常能容忍。训练时，float16 还需要把梯度放大，
# 免得很小的梯度舍入成零（`torch.amp.GradScaler`）；bfloat16 的范围与 float32 相同，不需要这一步。
#
# ## 显存带宽：少占字节，少读写几趟
#
# `x * 2` 受带宽限制：它的耗时就是把每个字节读一遍、写一遍的时间。由此有两种对策。
# 第一种是用更小的数：同样的 `x * 2` 改用 16 位，搬运的字节减半，在 GPU 上耗时应当大约减半。
# 在 CPU 上，收益取决于芯片：PyTorch 在 CPU 上要先把 16 位的数转换成 float32 再计算，
# 而且缓存可能放得下一种大小、放不下另一种。

# %% tags=["nbval-ignore-output", "key-result"]
x = torch.randn((8 if device.type == "cpu" else 64) * 2**20, device=device)  # 32 或 256 MiB
x_low = x.to(low)
out, out_low = torch.empty_like(x), torch.empty_like(x_low)
labels = ("x * 2 in float32", f"x * 2 in {low_name}")
halved = d2l_gpu.compare(
    lambda: torch.mul(x, 2, out=out), lambda: torch.mul(x_low, 2, out=out_low), labels=labels,
    device=device,
)
print(halved)

# %% [markdown]
# 第二种是*融合*（fusion）：把几步运算放在对数据的同一遍读写里完成。
# 逐个执行时，`torch.relu(x * 2 + 1)` 要启动三个核函数，每个都从显存读一个完整的张量、再写回一个：
# 一共六趟，而这项工作只需要两趟，读一次 `x`、写一次结果。融合后的核函数把中间结果留在寄存器里。
# `torch.compile` 会生成这样的核函数：第一次调用时追踪函数、生成代码（CPU 上是 C++，GPU 上是 Triton）并编译；
# 之后的调用直接运行融合后的核函数。
#
# 代价是第一次调用。单元格打印这次调用的耗时（再次运行时，如果临时文件夹里 torch 的编译缓存已经存有这个核函数，耗时会少一些），
# 再比较两种写法，并检查两者结果一致。
# 在 CPU 上编译需要 C++ 编译器，在 CUDA GPU 上需要 Triton；缺少它们时（例如没有编译器的 Windows），
# 单元格改为打印错误信息，然后继续运行。

# %% tags=["nbval-ignore-output", "key-result"]
import time


def scale_shift_relu(t):
    return torch.relu(t * 2 + 1)  # 逐个执行时是三个核函数


start = time.perf_counter()
try:
    fused = torch.compile(scale_shift_relu)
    fused(x)  # 第一次调用：追踪并编译
except Exception as e:  # 没有编译器、没有 Triton，或 torch.compile 不支持的平台
    print(f"torch.compile failed on {device}: {type(e).__name__}: {' '.join(str(e).split())[:200]}")
else:
    d2l_gpu.synchronize(device)
    print(f"first call, compiling included: {time.perf_counter() - start:.1f} s")
    print("same results:", torch.allclose(fused(x), scale_shift_relu(x)))
    labels = ("three kernels", "one fused kernel")
    eager, compiled = (lambda: scale_shift_relu(x)), (lambda: fused(x))
    print(d2l_gpu.compare(eager, compiled, labels=labels, device=device))

# %% [markdown]
# 运算链越长、每一步越简单，融合的收益就越大：一层网络末尾那些逐元素的运算（偏置、激活、dropout、归一化）
# 是最常见的例子，`torch.compile` 让模型变快的收益也有很大一部分来自这里。
#
# ## 开销：减少启动、合并成批量运算
#
# GPU 在等主机时，办法是让主机为同样多的 GPU 工作少做些事。一种办法是少启动：
# *CUDA 图*（CUDA Graph）把一串核函数记录一次，之后只需启动一次就能把它们全部重放。
# 下面的单元格记录 50 个极小的核函数，把重放和逐个启动相比较。
# 在 CPU 上，它只说明 GPU 上会看到什么：重放快得多，因为占大头的是启动，而不是核函数本身。
# `torch.compile(mode="reduce-overhead")` 会替你记录这样的 CUDA 图。

# %% tags=["nbval-ignore-output", "key-result"]
if device.type == "cuda":
    small = torch.ones(1024, device=device)

    def fifty_launches():
        for _ in range(50):
            small.mul_(1.0)

    side = torch.cuda.Stream(device)  # 捕获之前，先在另一条流上预热
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        fifty_launches()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fifty_launches()
    labels = ("50 launches", "one graph replay")
    print(d2l_gpu.compare(fifty_launches, graph.replay, labels=labels, device=device))
else:
    print(f"CUDA Graphs need a CUDA GPU; on {device} there are no launches to save.")

# %% [markdown]
# 另一种办法是让每次启动多做些事：64 次小矩阵乘法逐个计算，
# 对比一次完成同样运算的批量矩阵乘法（`torch.bmm`）。在 GPU 上差距比 CPU 上更大：
# 64 次启动每次都要花几微秒。即便如此，批量矩阵乘法在 GPU 上的速率仍远低于 float32 上限：
# 64 个 64 × 64 的矩阵，工作量太少，填不满一块大 GPU。

# %% tags=["nbval-ignore-output", "key-result"]
stack = torch.randn(64, 64, 64, device=device)  # 64 个 64 × 64 的矩阵
stack_out = torch.empty_like(stack)


def one_by_one():
    for m, o in zip(stack, stack_out, strict=True):
        torch.mm(m, m, out=o)


def batched():
    torch.bmm(stack, stack, out=stack_out)


labels = ("64 products", "one batched product")
batch = d2l_gpu.compare(one_by_one, batched, labels=labels, device=device)
print(batch)
stack_flop = 64 * 2 * 64**3  # 64 次 64 × 64 的矩阵乘法
for m in (batch.first, batch.second):
    print(f"  {m.label}: {stack_flop / m.median / 1e12:.3g} TFLOP/s")

# %% [markdown]
# ## 本课小结
#
# - 每种瓶颈有自己的对策。算力：降低精度，从 A100 起用 bfloat16，较旧的显卡用 float16，
#   float32 乘法还可以用 TF32。显存带宽：让每个数少占字节，以及核函数融合；
#   `torch.compile` 能做融合，代价是第一次调用要编译。开销：CUDA 图一次启动许多核函数，
#   合并成批量运算让每次启动做更多的事。
# - 对策和别的东西一样要实测：和它所替换的代码并排比较，再把速率和设备的上限相比。
#
# 下一课：[13 – 走出单机](13-beyond-one-machine.ipynb)，把工作扩展到多块 GPU 和多台机器。
