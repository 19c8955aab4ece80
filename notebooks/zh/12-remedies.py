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
# - 三种瓶颈各自的对策，每一种都和它所替换的代码并排实测，并与设备的上限对照：算力靠降低精度；显存带宽靠让每个数少占字节、靠核函数融合；开销靠减少启动、合并成批量运算；
# - 哪种 GPU 该用哪种低精度，以及训练中怎样使用它：`torch.autocast`，用 float16 时再加上 `torch.amp.GradScaler`；
# - `torch.compile` 融合了什么，第一次调用要付出多少时间；CUDA 图对它所重放的代码有哪些要求。
#
# **你需要**
#
# - 先读过 [11 – 三种瓶颈](11-three-limits.ipynb)，了解三种瓶颈、上限表和判断方法；[09 – 给 GPU 计时](09-timing-a-gpu.ipynb) 讲了 `benchmark` 和 `compare`；本课训练的小模型来自 [10](10-profiler-and-meta.ipynb)。GPU 不是必需的：在 CPU 上每个单元格都能运行，文字会说明 GPU 上会看到什么。
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
# [11](11-three-limits.ipynb) 判断出了是哪一种瓶颈，对策就取决于这个判断：计算受限的工作需要更快的运算，带宽受限的工作需要少搬运字节，受开销拖累的工作需要减少经过主机的次数。对策若没有对准瓶颈，收效甚微。
#
# ## 算力：降低精度
#
# 张量核心做 16 位的乘法比 float32 快很多倍。bfloat16 的范围与 float32 相同，但只有 8 个有效二进制位；float16 有 11 个有效二进制位，但超过 65,504 就会溢出。从 A100 起（CUDA 计算能力 8.0），张量核心两种都支持。更早的显卡，包括 Colab 常分配的 T4 和 V100，张量核心只支持 float16：PyTorch 在这些显卡上仍然接受 bfloat16，但算得并不比 float32 快，往往更慢。Apple GPU 没有张量核心；单元格给它选 float16，也就是 Metal 自己的半精度格式，收益可能很小。
#
# 单元格还抄录了 11 的上限表，下面每个速率都会打印成它占上限的百分比（在 CPU 上是占 11 的估计值的百分比）。

# %% tags=["nbval-ignore-output"]
# 11 的上限表：float32、TF32 和 16 位的 TFLOP/s，显存带宽 GB/s；None 表示没有这种运算单元
LIMITS = {
    "NVIDIA H200": dict(float32=67, tf32=495, low=989, memory=4800),
    "NVIDIA H200 NVL": dict(float32=60, tf32=418, low=835, memory=4800),
    "NVIDIA H100 80GB HBM3": dict(float32=67, tf32=495, low=989, memory=3350),
    "NVIDIA H100 NVL": dict(float32=60, tf32=418, low=835, memory=3900),
    "NVIDIA H100 PCIe": dict(float32=51, tf32=378, low=756, memory=2000),
    "NVIDIA A100-SXM4-80GB": dict(float32=19.5, tf32=156, low=312, memory=2039),
    "NVIDIA A100-SXM4-40GB": dict(float32=19.5, tf32=156, low=312, memory=1555),
    "NVIDIA L4": dict(float32=30.3, tf32=60, low=121, memory=300),
    "NVIDIA GeForce RTX 4090": dict(float32=82.6, tf32=82.6, low=165, memory=1008),
    "NVIDIA GeForce RTX 3090": dict(float32=35.6, tf32=35.6, low=71, memory=936),
    "Tesla V100-SXM2-16GB": dict(float32=15.7, tf32=None, low=125, memory=900),
    "Tesla V100-SXM2-32GB": dict(float32=15.7, tf32=None, low=125, memory=900),
    "Tesla V100-PCIE-16GB": dict(float32=14, tf32=None, low=112, memory=900),
    "Tesla V100-PCIE-32GB": dict(float32=14, tf32=None, low=112, memory=900),
    "Tesla T4": dict(float32=8.1, tf32=None, low=65, memory=320),
    "Tesla P100-PCIE-16GB": dict(float32=9.3, tf32=None, low=18.7, memory=732),
}

device = d2l_gpu.try_gpu()
torch.set_num_threads(1)  # 只用一个 CPU 线程，同 09：计时更稳定
before_ampere = device.type == "cuda" and torch.cuda.get_device_capability(device) < (8, 0)
low = torch.float16 if before_ampere or device.type == "mps" else torch.bfloat16
low_name = str(low).removeprefix("torch.")
name = (
    torch.cuda.get_device_name(device) if device.type == "cuda" else f"this {device.type.upper()}"
)
if name in LIMITS:
    limits, source = LIMITS[name], "datasheet"
elif device.type == "cpu":  # 11 的估计值：3 GHz，每个周期 32 或 64 次 float32 运算
    per_cycle = 64 if "AVX512" in torch.backends.cpu.get_cpu_capability() else 32
    float32 = torch.get_num_threads() * 3e9 * per_cycle / 1e12
    limits, source = dict(float32=float32, memory=50), "estimate"
else:
    limits, source = {}, None


def share(rate, kind, unit):
    # 速率，以及它占设备上限的百分比
    limit, kind = limits.get(kind), low_name if kind == "low" else kind
    if limit is None:
        return f"{rate:.3g} {unit}, no {kind} limit known for {name}"
    text = f"{rate:.3g} {unit} = {100 * rate / limit:.0f} % of {limit:.3g} ({kind}, {source})"
    if rate > limit:
        text += ": above it, a cache held the data or the limit is set too low"
    return text


print(f"on {device} ({name}), the lower precision is {low_name}")

# %% [markdown]
# 单元格给一次大的矩阵乘法分别用 float32 和低精度计时。输入只在计时的调用之外转换一次数据类型，所以测得的是乘法本身的速率；达到数据手册峰值的 80% 左右就已经到头了。在 CUDA GPU 上，单元格还允许 float32 乘法使用 TF32（`torch.set_float32_matmul_precision("high")`）：输入舍入到 11 个有效二进制位，累加仍按 float32。A100 之前的显卡没有 TF32，这些乘法仍按普通的 float32 计算。
#
# 在 CPU 上，结果取决于芯片，单元格会打印这块芯片有没有 bfloat16 运算单元。没有的芯片（大多数笔记本电脑都是这样）要先把 bfloat16 转换成 float32 再计算，乘法会比 float32 慢很多倍；有这种运算单元（AMX、AVX-512 BF16）的芯片则会变快。这个单元格和本课所有 CUDA 分支都还没有在 GPU 上运行过。

# %% tags=["nbval-ignore-output", "key-result"]
if device.type == "cpu":
    bf16_units = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    print(f"this CPU: {torch.backends.cpu.get_cpu_capability()}, bfloat16 units: {bf16_units}")
n = 256 if device.type == "cpu" else 8192
a = torch.randn(n, n, device=device)
c = torch.empty_like(a)
a_low = a.to(low)  # 只转换一次，放在计时的调用之外
c_low = torch.empty_like(a_low)
flop = 2 * n**3


def float32_product():
    torch.matmul(a, a, out=c)


def low_product():
    torch.matmul(a_low, a_low, out=c_low)


precision = d2l_gpu.compare(
    float32_product, low_product, labels=("float32", low_name), device=device
)
print(precision)
print(f"  float32 product: {share(flop / precision.first.median / 1e12, 'float32', 'TFLOP/s')}")
print(f"  {low_name} product: {share(flop / precision.second.median / 1e12, 'low', 'TFLOP/s')}")
if device.type == "cuda":
    torch.set_float32_matmul_precision("high")  # float32 乘法可以使用 TF32
    tf32 = d2l_gpu.benchmark(float32_product, device=device)
    torch.set_float32_matmul_precision("highest")  # 恢复默认值
    print(
        f"  float32 product with TF32 allowed: {share(flop / tf32.median / 1e12, 'tf32', 'TFLOP/s')}"
    )

# %% [markdown]
# ## 训练中的低精度
#
# 训练时，`torch.autocast` 包住前向传播和损失的计算。在它里面，矩阵乘法和卷积用低精度计算；需要 float32 的范围或精度的运算（损失、softmax、归一化、求和、`exp`、`log`）用 float32 计算；其余运算沿用输入的数据类型。权重始终是 float32：autocast 为每次乘法转换出一份 16 位的副本，优化器更新的是 float32 的原件，因为一次更新往往比它所改的权重小得多。在 bfloat16 里，1 + 0.001 还是 1。
#
# float16 还需要多一步。它的数小于约 6e-8 就会舍入成零，很小的梯度也是如此。`torch.amp.GradScaler` 在 `backward` 之前把损失乘上一个很大的缩放因子（起初是 65,536），在更新参数之前再把梯度除回去；梯度溢出的那一步会被跳过，缩放因子减半。bfloat16 的范围与 float32 相同，不需要缩放。
#
# 单元格从同样的初始参数出发，用三种方式训练 10 的模型，各 30 步：float32、float16 加梯度缩放器、不加缩放器的 bfloat16，并打印每步时间的中位数、最后的损失和缩放因子。GPU 上的层更宽，正如上面 GPU 上的乘法更大，这样 16 位的训练步应当比 float32 快好几倍，损失则大致相同（这是预测）。在 CPU 上，耗时和上面一样取决于芯片。

# %% tags=["nbval-ignore-output", "key-result"]
import statistics

from torch import nn

features, width, rows = (64, 256, 512) if device.type == "cpu" else (1024, 4096, 4096)
inputs = torch.randn(rows, features, device=device)
targets = inputs[:, :1] - 2 * inputs[:, 1:2]  # 要学习的目标


def train(dtype, scaler=None, steps=30):
    torch.manual_seed(0)  # 每次训练都从同样的初始参数出发
    model = nn.Sequential(nn.Linear(features, width), nn.ReLU(), nn.Linear(width, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=10 / width)  # 层越宽，步长越小
    timer = d2l_gpu.Timer(device)
    for _ in range(steps):
        timer.start()
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            outputs = model(inputs)
            loss = nn.functional.mse_loss(outputs, targets)
        optimizer.zero_grad()
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:  # float16：放大损失，再把梯度缩回，溢出的那一步跳过
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        timer.stop()
    step_ms = statistics.median(timer.times[5:]) * 1e3  # 前几步是预热
    scale = f", scale {scaler.get_scale():g}" if scaler else ""
    print(f"  {step_ms:.3g} ms a step, final loss {loss.item():.4f}{scale}")
    return outputs, loss, model


print("float32:")
train(torch.float32)
print("float16 under autocast, with a GradScaler:")
train(torch.float16, torch.amp.GradScaler(device.type))
print("bfloat16 under autocast, no scaler:")
outputs, loss, model = train(torch.bfloat16)
print(f"layer outputs {outputs.dtype}, loss {loss.dtype}, weights {model[0].weight.dtype}")
print("1 + 0.001 in bfloat16:", (torch.tensor(1.0, dtype=torch.bfloat16) + 0.001).item())
tiny = torch.tensor(1e-8)  # 一个很小的梯度
print(f"1e-8 in float16: {tiny.half().item():g}; times 65,536 first: {(tiny * 65536).half():.3g}")

# %% [markdown]
# ## 显存带宽：少占字节，少读写几趟
#
# `x * 2` 受带宽限制：它的耗时就是把每个字节读一遍、写一遍的时间。由此有两种对策。第一种是让每个数少占字节：同样的 `x * 2` 改用 16 位，搬运的字节减半，在 GPU 上耗时应当大约减半。在 CPU 上，16 位的数要先转换再计算，而且缓存可能放得下一种大小、放不下另一种，所以收益取决于芯片。

# %% tags=["nbval-ignore-output", "key-result"]
x = torch.randn((8 if device.type == "cpu" else 64) * 2**20, device=device)  # 32 或 256 MiB
x_low = x.to(low)
out, out_low = torch.empty_like(x), torch.empty_like(x_low)
labels = ("x * 2 in float32", f"x * 2 in {low_name}")
halved = d2l_gpu.compare(
    lambda: torch.mul(x, 2, out=out),
    lambda: torch.mul(x_low, 2, out=out_low),
    labels=labels,
    device=device,
)
print(halved)
for t, m in ((x, halved.first), (x_low, halved.second)):
    moved = 2 * t.numel() * t.element_size()  # 读一遍，写一遍
    print(f"  {m.label}: {share(moved / m.median / 1e9, 'memory', 'GB/s')}")

# %% [markdown]
# 第二种是*核函数融合*（fusion）：把几步运算放在对数据的同一遍读写里完成。单元格像上面一样把 `relu(x * 2 + 1)` 写进缓冲区 `out`，这样每次调用都不分配内存：在 CPU 上，为 32 MiB 的结果分配新的内存页，花的时间可能比计算本身还多。逐个执行时，它的三个核函数每个都读一个完整的张量、再写回一个：一共六趟，而这项工作只需要两趟，读一次 `x`、写一次结果。融合后的核函数把中间结果留在寄存器里。`torch.compile` 会生成这样的核函数：第一次调用时追踪函数、生成代码（CPU 上是 C++，CUDA GPU 上是 Triton，Apple GPU 上是 Metal）并编译；之后的调用直接运行融合后的核函数。
#
# 代价是第一次调用。如果临时文件夹里 torch 的编译缓存已经存有这个核函数，只要几秒；缓存为空时，可能要几十秒。单元格会说明是哪一种情况，然后比较两种写法，检查两者结果一致，并打印融合后核函数的速率。在 CPU 上编译需要 C++ 编译器；在 CUDA GPU 上需要 Triton，而 Triton 本身又需要 C 编译器和 Python 的头文件（`Python.h`）。缺少其中之一时（例如没有编译器的 Windows、精简的容器），单元格改为打印错误信息，然后继续运行。

# %% tags=["nbval-ignore-output", "key-result"]
import time


def scale_shift_relu(t, result):
    return torch.mul(t, 2, out=result).add_(1).relu_()  # 逐个执行时是三个核函数


start = time.perf_counter()
try:
    from torch._dynamo.utils import counters  # torch.compile 的计数，其中有缓存命中的次数

    hits = counters["inductor"]["fxgraph_cache_hit"]
    fused = torch.compile(scale_shift_relu)
    fused(x, out)  # 第一次调用：追踪并编译
except Exception as e:  # 没有编译器、没有 Triton，或 torch.compile 不支持的平台
    print(f"torch.compile failed on {device}: {type(e).__name__}: {' '.join(str(e).split())[:200]}")
else:
    d2l_gpu.synchronize(device)
    cache = "hit" if counters["inductor"]["fxgraph_cache_hit"] > hits else "miss"
    print(f"first call, compiling included: {time.perf_counter() - start:.1f} s (cache {cache})")
    print("same results:", torch.allclose(fused(x, out), scale_shift_relu(x, torch.empty_like(x))))
    labels = ("three kernels", "one fused kernel")
    eager, compiled = (lambda: scale_shift_relu(x, out)), (lambda: fused(x, out))
    fusion = d2l_gpu.compare(eager, compiled, labels=labels, device=device)
    print(fusion)
    moved = 2 * x.numel() * x.element_size()  # 这项工作需要的两趟
    print(f"  one fused kernel: {share(moved / fusion.second.median / 1e9, 'memory', 'GB/s')}")

# %% [markdown]
# 运算链越长、每一步越简单，融合的收益就越大，一层网络末尾那些逐元素的运算（偏置、激活、暂退法、归一化）就是例子。
#
# ## 开销：减少启动、合并成批量运算
#
# GPU 在等主机时，办法是让主机为同样多的 GPU 工作少做些事。一种办法是少启动：*CUDA 图*（CUDA Graph）把一串核函数记录一次，之后只需启动一次就能把它们全部重放；`torch.compile(mode="reduce-overhead")` 会替你记录这样的 CUDA 图。重放只会原样重复记录下来的内容，由此有几条规则：
#
# - 同样的显存：每个核函数读写的都是捕获时的地址。新数据必须复制进捕获时的输入张量（`static_in.copy_(batch)`）；每次重放都会覆盖输出，要保留的结果得先复制一份（`clone`）；
# - 同样的形状：每种形状一张图（`reduce-overhead` 遇到新的形状就再记录一张）；
# - 不能有需要等主机的操作：捕获期间调用 `.item()` 或 `print(tensor)` 会报错；Python 代码（包括 `if`）只在捕获时运行一次，每次重放都沿用当时走的分支；
# - 捕获期间分配的显存来自一个私有的显存池，只要图还在，这块显存就一直保留。
#
# 违反前两条不会报错：重放在旧数据上计算，结果悄无声息地过时了。单元格先把逐个启动的 50 个极小核函数和一次重放相比较，再把捕获的 `scale_shift_relu` 重放两次：一次先把新数据复制进去，一次新建了张量却没有复制进去。在 GPU 上，预计重放只需逐个启动的一小部分时间，两项检查都打印 True（这是预测）。

# %% tags=["nbval-ignore-output", "key-result"]
if device.type == "cuda":
    small = torch.ones(1024, device=device)
    static_in = torch.randn(1024, device=device)  # 捕获的输入和输出：地址固定
    static_out = torch.empty_like(static_in)

    def fifty_launches():
        for _ in range(50):
            small.mul_(1.0)

    side = torch.cuda.Stream(device)  # 捕获之前，先在另一条流上预热
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        fifty_launches()
        scale_shift_relu(static_in, static_out)
    torch.cuda.current_stream(device).wait_stream(side)
    graph, step_graph = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fifty_launches()
    with torch.cuda.graph(step_graph):
        scale_shift_relu(static_in, static_out)
    labels = ("50 launches", "one graph replay")
    print(d2l_gpu.compare(fifty_launches, graph.replay, labels=labels, device=device))
    fresh = torch.randn(1024, device=device)
    expected = scale_shift_relu(fresh, torch.empty_like(fresh))
    static_in.copy_(fresh)  # 新数据复制进捕获时的张量
    step_graph.replay()
    print("copied in, replayed: the new result:", torch.equal(static_out, expected))
    unseen = torch.randn(1024, device=device)  # 新建的张量，图从来不读它
    step_graph.replay()
    print("a new tensor, not copied in: the old result again:", torch.equal(static_out, expected))
else:
    print(f"CUDA Graphs need a CUDA GPU; on {device} this cell runs nothing. On one it prints")
    print("50 launches against one replay, then True twice: the new result, then a stale one.")

# %% [markdown]
# 另一种办法是让每次启动多做些事：把逐个计算的 64 次小矩阵乘法，与一次完成同样运算的批量矩阵乘法（`torch.bmm`）相比。在 GPU 上差距比 CPU 上更大，因为每次启动都要花几微秒；即便如此，批量矩阵乘法在 GPU 上的速率仍远低于 float32 上限：64 个 64 × 64 的矩阵，工作量太少，填不满一块大 GPU。

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
    print(f"  {m.label}: {share(stack_flop / m.median / 1e12, 'float32', 'TFLOP/s')}")

# %% [markdown]
# ## 本课小结
#
# - 每种瓶颈有自己的对策。算力：降低精度，从 A100 起用 bfloat16，较旧的显卡用 float16，float32 乘法还可以用 TF32；训练时，`torch.autocast` 让权重、损失和求和等归约运算保持 float32，用 float16 时再加上 `GradScaler`。显存带宽：让每个数少占字节，以及核函数融合；`torch.compile` 能做融合，代价是第一次调用要编译。开销：在固定的显存和形状上重放的 CUDA 图，以及让每次启动做更多事的批量运算。
# - 对策也要像其他改动一样实测：和它所替换的代码并排比较，再把速率和设备的上限相比。
#
# 下一课：[13 – 走出单机](13-beyond-one-machine.ipynb)，把工作扩展到多块 GPU 和多台机器。
