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
#   replaces: lower precision for compute; fewer bytes per number and fusion for
#   memory bandwidth; fewer launches and bigger batches for overhead;
# - which lower precision to choose on which GPU: bfloat16 from the A100 on,
#   float16 on older cards such as Colab's T4;
# - what `torch.compile` fuses, what its first call costs, and what to expect
#   where it cannot compile.
#
# **What you need**
#
# - [11 – Three limits](11-three-limits.ipynb), for the limits, their table and
#   how to tell which one holds; [09 – Timing a GPU](09-timing-a-gpu.ipynb) for
#   `benchmark` and `compare`. A GPU is optional: on a CPU every cell runs, and
#   the text says what a GPU shows.

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
# [11](11-three-limits.ipynb) turned times into rates and held them against
# the device's limits to see which limit holds. The remedy depends on the
# answer: work bound by compute needs cheaper arithmetic, work bound by memory
# bandwidth needs fewer bytes moved, and work bound by overhead needs fewer
# trips through the host. A remedy for the wrong limit gains little.
#
# ## Compute: lower precision
#
# Tensor cores multiply 16-bit numbers many times faster than float32 ones;
# the float16 / bfloat16 column of 11's table says how much faster. bfloat16
# keeps float32's range but only 8 significant bits; float16 keeps 11
# significant bits but overflows above 65,504. Which one to use depends on
# the card. From the A100 on (CUDA compute capability 8.0)
# tensor cores take both. Older cards, among them the T4 that Colab often
# lends and the V100, have tensor cores for float16 only: PyTorch still
# accepts bfloat16 there, but runs it no faster than float32, often slower.
# Apple GPUs get float16 too, the half format Metal has always had. The cell
# picks the format from the device.

# %% tags=["nbval-ignore-output"]
device = d2l_gpu.try_gpu()
before_ampere = device.type == "cuda" and torch.cuda.get_device_capability(device) < (8, 0)
low = torch.float16 if before_ampere or device.type == "mps" else torch.bfloat16
low_name = str(low).removeprefix("torch.")
print(f"on {device}, the lower precision is {low_name}")

# %% [markdown]
# The cell below times a large float32 product against the same product in
# the lower precision and prints both rates. The inputs are cast once,
# outside the timed call, so that the rate is that of the product alone and
# can be held against 11's table, where about 80 % is as good as it gets. In
# a model, `torch.autocast` does the casting: inside its block, products run
# in the lower precision and the rest stays float32. It casts the inputs at
# every call (a layer's weights once per block), which costs memory traffic
# of its own; the last line shows what autocast returns.
#
# On a CUDA GPU the cell also allows TF32 for float32 products
# (`torch.set_float32_matmul_precision("high")`): inputs rounded to 11
# significant bits, sums kept in float32. Cards before the A100 have no TF32
# and run these products in plain float32. On a CPU the outcome depends on
# the chip: one with bfloat16 units (AMX, AVX-512 BF16) gains, many others
# lose, and on some the verdict changes from run to run. No GPU has run this
# cell, nor any CUDA branch of this lesson.

# %% tags=["nbval-ignore-output", "key-result"]
n = 512 if device.type == "cpu" else 8192
a = torch.randn(n, n, device=device)
c = torch.empty_like(a)
a_low = a.to(low)  # cast once, outside the timed call
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
    torch.set_float32_matmul_precision("high")  # float32 products may use TF32
    tf32 = d2l_gpu.benchmark(float32_product, device=device)
    torch.set_float32_matmul_precision("highest")  # back to the default
    print(f"  float32 product with TF32 allowed: {flop / tf32.median / 1e12:.3g} TFLOP/s")
with torch.autocast(device_type=device.type, dtype=low):
    print("under autocast, a @ a comes out in", (a @ a).dtype)

# %% [markdown]
# Lower precision changes the results a little; deep learning usually
# tolerates it. For training, float16 also needs its gradients scaled up so
# that small ones do not round to zero (`torch.amp.GradScaler`); bfloat16,
# with float32's range, does not.
#
# ## Memory bandwidth: fewer bytes, fewer trips
#
# `x * 2` is bound by memory: its time is the time to read and write every
# byte. Two remedies follow. The first is smaller numbers: the same `x * 2` in
# 16 bits moves half the bytes, so on a GPU it should take about half as
# long. On a CPU the gain depends on the chip: PyTorch converts 16-bit
# numbers to float32 for the arithmetic there, and the caches may hold one
# size and not the other.

# %% tags=["nbval-ignore-output", "key-result"]
x = torch.randn((8 if device.type == "cpu" else 64) * 2**20, device=device)  # 32 or 256 MiB
x_low = x.to(low)
out, out_low = torch.empty_like(x), torch.empty_like(x_low)
labels = ("x * 2 in float32", f"x * 2 in {low_name}")
halved = d2l_gpu.compare(
    lambda: torch.mul(x, 2, out=out), lambda: torch.mul(x_low, 2, out=out_low), labels=labels,
    device=device,
)
print(halved)

# %% [markdown]
# The second is *fusion*: doing several steps in one pass over the data. Run
# one by one, `torch.relu(x * 2 + 1)` launches three kernels, and each reads
# a whole tensor from memory and writes one back: six trips for work that
# needs two, one read of `x` and one write of the result. A fused kernel
# keeps the intermediate values in registers. `torch.compile` writes such
# kernels: it traces the function on its first call, generates code (C++ on a
# CPU, Triton on a GPU) and compiles it; later calls run the fused kernel.
#
# The first call is the price. The cell prints it (less on a second run, when
# torch's compile cache in the temporary folder already holds the kernel),
# then compares the two versions and checks that they agree. Compiling needs a C++ compiler on a CPU
# and Triton on a CUDA GPU; where they are missing (Windows without a
# compiler, for instance) the cell prints the error instead and carries on.

# %% tags=["nbval-ignore-output", "key-result"]
import time


def scale_shift_relu(t):
    return torch.relu(t * 2 + 1)  # three kernels when run one by one


start = time.perf_counter()
try:
    fused = torch.compile(scale_shift_relu)
    fused(x)  # the first call traces and compiles
except Exception as e:  # no compiler, no Triton, a platform torch.compile does not support
    print(f"torch.compile failed on {device}: {type(e).__name__}: {' '.join(str(e).split())[:200]}")
else:
    d2l_gpu.synchronize(device)
    print(f"first call, compiling included: {time.perf_counter() - start:.1f} s")
    print("same results:", torch.allclose(fused(x), scale_shift_relu(x)))
    labels = ("three kernels", "one fused kernel")
    eager, compiled = (lambda: scale_shift_relu(x)), (lambda: fused(x))
    print(d2l_gpu.compare(eager, compiled, labels=labels, device=device))

# %% [markdown]
# Fusion pays most where the chain is long and each step cheap: the
# element-wise tails of a layer (bias, activation, dropout, normalization)
# are the usual case, and a large part of what `torch.compile` gains on a
# model.
#
# ## Overhead: fewer launches, bigger batches
#
# When the GPU waits for the host, the cure is less host work per unit of GPU
# work. One way is to launch less: a *CUDA Graph* records a sequence of kernels
# once and replays all of them with a single launch. The cell records 50 tiny
# kernels and compares the replay with launching them one by one. On a CPU it
# only says what a GPU shows: the replay is much faster, as the launches, not
# the kernels, dominate. `torch.compile(mode="reduce-overhead")` records
# such graphs for you.

# %% tags=["nbval-ignore-output", "key-result"]
if device.type == "cuda":
    small = torch.ones(1024, device=device)

    def fifty_launches():
        for _ in range(50):
            small.mul_(1.0)

    side = torch.cuda.Stream(device)  # capture wants warmed-up kernels on a side stream
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
# The other way is to give each launch more work: 64 small products one by
# one, against one batched product (`torch.bmm`) that does the same arithmetic
# in one call. On a GPU the gap is wider than on a CPU: each of the 64
# launches costs microseconds. Even so, the batched product stays far below
# the float32 limit there: 64 matrices of 64 x 64 are too little work to keep
# a large GPU busy.

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
    print(f"  {m.label}: {stack_flop / m.median / 1e12:.3g} TFLOP/s")

# %% [markdown]
# ## What this lesson showed
#
# - Each limit has its own remedy. Compute: lower precision, bfloat16 from the
#   A100 on and float16 on older cards, with TF32 for float32 products.
#   Memory bandwidth: fewer bytes per number, and fusion, which `torch.compile`
#   does at the price of a first call that compiles. Overhead: CUDA Graphs
#   launch many kernels at once, and batching gives each launch more work.
# - A remedy is measured like anything else: side by side with the code it
#   replaces, and its rate held against the device's limit.
#
# Next: [13 – Beyond one machine](13-beyond-one-machine.ipynb) takes the work
# past one GPU.
