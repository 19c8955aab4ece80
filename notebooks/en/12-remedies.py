# %% [markdown]
# # Remedies: lower precision, fusion and fewer launches
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/12-remedies.ipynb)
#
# What a GPU printed for these lessons: [notebooks/gpu](../gpu/README.md).
#
# *Beyond the book: this lesson goes past the chapter.*
#
# **What you will learn**
#
# - one remedy for each of the three limits, each measured against the code it
#   replaces and held against the device's limit: lower precision for compute;
#   fewer bytes per number and fusion for memory bandwidth; fewer launches and
#   bigger batches for overhead;
# - which lower precision to choose on which GPU, and how a training step uses
#   it: `torch.autocast`, with `torch.amp.GradScaler` for float16;
# - what `torch.compile` fuses and what its first call costs; what CUDA Graphs
#   demand of the code they replay.
#
# **What you need**
#
# - [11 – Three limits](11-three-limits.ipynb), for the limits, their table and
#   how to tell which one holds; [09 – Timing a GPU](09-timing-a-gpu.ipynb) for
#   `benchmark` and `compare`; [10](10-profiler-and-meta.ipynb) for the small
#   model trained here. A GPU is optional: on a CPU every cell runs, and the
#   text says what a GPU shows.

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
# ## A remedy must fit the limit
#
# [11](11-three-limits.ipynb) found which limit holds, and the remedy depends
# on it: work bound by compute needs cheaper arithmetic, by memory bandwidth
# fewer bytes moved, by overhead fewer trips through the host. A remedy for the
# wrong limit gains little.
#
# ## Compute: lower precision
#
# Tensor cores multiply 16-bit numbers many times faster than float32 ones.
# bfloat16 keeps float32's range but only 8 significant bits; float16 keeps 11
# significant bits but overflows above 65,504. From the A100 on (CUDA compute
# capability 8.0) tensor cores take both. Older cards, among them the T4 that
# Colab often lends and the V100, have tensor cores for float16 only: PyTorch
# accepts bfloat16 there but runs it no faster than float32, often slower.
# Apple GPUs have no tensor cores; the cell gives them float16, Metal's own
# half format, which may gain little.
#
# The cell copies 11's table, so that each rate below is printed as a share of
# its limit (on a CPU, of 11's estimate).

# %% tags=["nbval-ignore-output"]
# 11's table: float32, TF32 and 16-bit TFLOP/s, memory GB/s; None: no such units
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
torch.set_num_threads(1)  # one CPU thread, as in 09: steadier timings
before_ampere = device.type == "cuda" and torch.cuda.get_device_capability(device) < (8, 0)
low = torch.float16 if before_ampere or device.type == "mps" else torch.bfloat16
low_name = str(low).removeprefix("torch.")
name = (
    torch.cuda.get_device_name(device) if device.type == "cuda" else f"this {device.type.upper()}"
)
if name in LIMITS:
    limits, source = LIMITS[name], "datasheet"
elif device.type == "cpu":  # 11's estimate: 3 GHz, 32 or 64 float32 operations a cycle
    per_cycle = 64 if "AVX512" in torch.backends.cpu.get_cpu_capability() else 32
    float32 = torch.get_num_threads() * 3e9 * per_cycle / 1e12
    limits, source = dict(float32=float32, memory=50), "estimate"
else:
    limits, source = {}, None


def share(rate, kind, unit):
    # a rate and its share of the device's limit
    limit, kind = limits.get(kind), low_name if kind == "low" else kind
    if limit is None:
        return f"{rate:.3g} {unit}, no {kind} limit known for {name}"
    text = f"{rate:.3g} {unit} = {100 * rate / limit:.0f} % of {limit:.3g} ({kind}, {source})"
    if rate > limit:
        text += ": above it, a cache held the data or the limit is set too low"
    return text


print(f"on {device} ({name}), the lower precision is {low_name}")

# %% [markdown]
# The cell times a large product in float32 and in the lower precision. The
# inputs are cast once, outside the timed call, so that the rate is that of the
# product alone; about 80 % of the datasheet is as good as it gets. On a CUDA
# GPU the cell also allows TF32 for float32 products
# (`torch.set_float32_matmul_precision("high")`): inputs rounded to 11
# significant bits, sums kept in float32. Cards before the A100 have no TF32
# and run these products in plain float32.
#
# On a CPU the outcome depends on the chip, which the cell names. Without
# bfloat16 units, as in most laptops, PyTorch converts bfloat16 to float32 for
# the arithmetic, and the product runs many times slower; with them (AMX,
# AVX-512 BF16) it gains. No GPU has run this cell, nor any CUDA branch of this
# lesson.

# %% tags=["nbval-ignore-output", "key-result"]
if device.type == "cpu":
    bf16_units = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    print(f"this CPU: {torch.backends.cpu.get_cpu_capability()}, bfloat16 units: {bf16_units}")
n = 256 if device.type == "cpu" else 8192
a = torch.randn(n, n, device=device)
c = torch.empty_like(a)
a_low = a.to(low)  # cast once, outside the timed call
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
    torch.set_float32_matmul_precision("high")  # float32 products may use TF32
    tf32 = d2l_gpu.benchmark(float32_product, device=device)
    torch.set_float32_matmul_precision("highest")  # back to the default
    print(
        f"  float32 product with TF32 allowed: {share(flop / tf32.median / 1e12, 'tf32', 'TFLOP/s')}"
    )

# %% [markdown]
# ## Lower precision in a training step
#
# In training, `torch.autocast` wraps the forward pass and the loss. Inside it,
# matrix products and convolutions run in the lower precision; operations that
# need float32's range or precision (losses, softmax, normalization, sums,
# `exp`, `log`) run in float32; the rest follow their inputs. The weights stay
# float32: autocast casts a 16-bit copy for each product, and the optimizer
# updates the float32 originals, since an update is often far smaller than its
# weight: in bfloat16, 1 + 0.001 is 1.
#
# float16 needs more. Below about 6e-8 its numbers round to zero, small
# gradients too. `torch.amp.GradScaler` multiplies the loss by a large scale
# (65,536 at first) before `backward` and divides the gradients by it before
# the step; a step whose gradients overflowed is skipped and the scale halved.
# bfloat16, with float32's range, needs no scaler.
#
# The cell trains 10's model from the same start three ways, 30 steps each:
# float32, float16 with a scaler, bfloat16 without, and prints the median time
# of a step, the final loss and the scale. A GPU gets wider layers, as it got a
# larger product, so that the 16-bit steps should be several times faster at
# about the same loss (a prediction). On a CPU the times follow the chip.

# %% tags=["nbval-ignore-output", "key-result"]
import statistics

from torch import nn

features, width, rows = (64, 256, 512) if device.type == "cpu" else (1024, 4096, 4096)
inputs = torch.randn(rows, features, device=device)
targets = inputs[:, :1] - 2 * inputs[:, 1:2]  # something to learn


def train(dtype, scaler=None, steps=30):
    torch.manual_seed(0)  # the same start for every run
    model = nn.Sequential(nn.Linear(features, width), nn.ReLU(), nn.Linear(width, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=10 / width)  # wider layers, smaller steps
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
        else:  # float16: scale up, unscale, skip a step that overflowed
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        timer.stop()
    step_ms = statistics.median(timer.times[5:]) * 1e3  # the first steps warm up
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
tiny = torch.tensor(1e-8)  # a small gradient
print(f"1e-8 in float16: {tiny.half().item():g}; times 65,536 first: {(tiny * 65536).half():.3g}")

# %% [markdown]
# ## Memory bandwidth: fewer bytes, fewer trips
#
# `x * 2` is bound by memory: its time is the time to read and write every
# byte. Two remedies follow. The first is fewer bytes per number: the same
# `x * 2` in 16 bits moves half the bytes, so on a GPU it should take about
# half as long. On a CPU, where 16-bit numbers are converted for the arithmetic
# and the caches may hold one size and not the other, the gain depends on the
# chip.

# %% tags=["nbval-ignore-output", "key-result"]
x = torch.randn((8 if device.type == "cpu" else 64) * 2**20, device=device)  # 32 or 256 MiB
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
    moved = 2 * t.numel() * t.element_size()  # read once, written once
    print(f"  {m.label}: {share(moved / m.median / 1e9, 'memory', 'GB/s')}")

# %% [markdown]
# The second is *fusion*: doing several steps in one pass over the data. The
# cell writes `relu(x * 2 + 1)` into the buffer `out`, as above, so that no
# call allocates memory: on a CPU, fresh pages for a 32 MiB result can cost
# more than the arithmetic. Run one by one, its three kernels each read a whole
# tensor and write one back: six trips for work that needs two, one read of `x`
# and one write of the result. A fused kernel keeps the intermediate values in
# registers. `torch.compile` writes such kernels: it traces the function on its
# first call, generates code (C++ on a CPU, Triton on a CUDA GPU, Metal on an
# Apple GPU) and compiles it; later calls run the fused kernel.
#
# The first call is the price: a few seconds when torch's compile cache, in the
# temporary folder, already holds the kernel, up to tens of seconds when it is
# empty; the cell says which. Then it compares the two versions, checks that
# they agree and prints the fused kernel's rate. A CPU needs a C++ compiler; a
# CUDA GPU needs Triton, which itself needs a C compiler and Python's headers
# (`Python.h`). Where one is missing (Windows without a compiler, a bare
# container) the cell prints the error and carries on.

# %% tags=["nbval-ignore-output", "key-result"]
import time


def scale_shift_relu(t, result):
    return torch.mul(t, 2, out=result).add_(1).relu_()  # three kernels, one by one


start = time.perf_counter()
try:
    from torch._dynamo.utils import counters  # torch.compile's tallies, cache hits among them

    hits = counters["inductor"]["fxgraph_cache_hit"]
    fused = torch.compile(scale_shift_relu)
    fused(x, out)  # the first call traces and compiles
except Exception as e:  # no compiler, no Triton, a platform torch.compile does not support
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
    moved = 2 * x.numel() * x.element_size()  # the two trips the work needs
    print(f"  one fused kernel: {share(moved / fusion.second.median / 1e9, 'memory', 'GB/s')}")

# %% [markdown]
# Fusion pays most on long chains of cheap steps, such as the element-wise
# tails of a layer (bias, activation, dropout, normalization).
#
# ## Overhead: fewer launches, bigger batches
#
# When the GPU waits for the host, the cure is less host work per unit of GPU
# work. One way is to launch less: a *CUDA Graph* records a sequence of kernels
# once and replays them all with a single launch;
# `torch.compile(mode="reduce-overhead")` records such graphs for you. A replay
# repeats exactly what was recorded, hence the rules:
#
# - the same memory: each kernel reads and writes the addresses it had at
#   capture. New data must be copied into the captured input
#   (`static_in.copy_(batch)`), and each replay overwrites the output: clone
#   what must survive;
# - the same shapes: one graph per shape (`reduce-overhead` records one for
#   each new shape);
# - nothing that waits for the host: `.item()` or `print(tensor)` during
#   capture is an error, and Python code, an `if` included, runs only at
#   capture: every replay takes the branch taken then;
# - the capture's allocations come from a private memory pool, reserved while
#   the graph lives.
#
# Breaking the first two raises no error: the replay computes on old data, and
# the results are silently stale. The cell times 50 tiny kernels launched one
# by one against one replay, then replays a captured `scale_shift_relu` with
# new data copied in, and with a new tensor never copied. On a GPU we expect
# the replay to take a fraction of the time and both checks to print True (a
# prediction).

# %% tags=["nbval-ignore-output", "key-result"]
if device.type == "cuda":
    small = torch.ones(1024, device=device)
    static_in = torch.randn(1024, device=device)  # captured input and output: fixed addresses
    static_out = torch.empty_like(static_in)

    def fifty_launches():
        for _ in range(50):
            small.mul_(1.0)

    side = torch.cuda.Stream(device)  # capture wants warmed-up kernels on a side stream
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
    static_in.copy_(fresh)  # new data goes into the captured tensor
    step_graph.replay()
    print("copied in, replayed: the new result:", torch.equal(static_out, expected))
    unseen = torch.randn(1024, device=device)  # a new tensor the graph never reads
    step_graph.replay()
    print("a new tensor, not copied in: the old result again:", torch.equal(static_out, expected))
else:
    print(f"CUDA Graphs need a CUDA GPU; on {device} this cell runs nothing. On one it prints")
    print("50 launches against one replay, then True twice: the new result, then a stale one.")

# %% [markdown]
# The other way is to give each launch more work: 64 small products one by one,
# against one batched product (`torch.bmm`) doing the same arithmetic in one
# call. On a GPU the gap is wider than on a CPU, since each launch costs
# microseconds; yet the batched product stays far below the float32 limit
# there: 64 matrices of 64 x 64 are too little work to keep a large GPU busy.

# %% tags=["nbval-ignore-output", "key-result"]
stack = torch.randn(64, 64, 64, device=device)  # 64 matrices of 64 x 64
stack_out = torch.empty_like(stack)


def one_by_one():
    for m, o in zip(stack, stack_out, strict=True):
        torch.mm(m, m, out=o)


def batched():
    torch.bmm(stack, stack, out=stack_out)


labels = ("64 products", "one batched product")
batch = d2l_gpu.compare(one_by_one, batched, labels=labels, device=device)
print(batch)
stack_flop = 64 * 2 * 64**3  # 64 products of 64 x 64
for m in (batch.first, batch.second):
    print(f"  {m.label}: {share(stack_flop / m.median / 1e12, 'float32', 'TFLOP/s')}")

# %% [markdown]
# ## What this lesson showed
#
# - Each limit has its own remedy. Compute: lower precision, bfloat16 from the
#   A100 on and float16 on older cards, TF32 for float32 products; in training,
#   `torch.autocast` keeps weights, losses and reductions in float32, and
#   float16 adds a `GradScaler`. Memory bandwidth: fewer bytes per number, and
#   fusion, which `torch.compile` does at the price of a first call that
#   compiles. Overhead: CUDA Graphs, replayed on fixed memory and shapes, and
#   batches that give each launch more work.
# - A remedy is measured like anything else: side by side with the code it
#   replaces, and its rate held against the device's limit.
#
# Next: [13 – Beyond one machine](13-beyond-one-machine.ipynb) takes the work
# past one GPU.
