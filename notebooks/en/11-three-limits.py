# %% [markdown]
# # Three limits: compute, memory bandwidth and overhead
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/11-three-limits.ipynb)
#
# What a GPU printed for these lessons: [notebooks/gpu](../gpu/README.md).
#
# *Beyond the book: this lesson goes past the chapter.*
#
# **What you will learn**
#
# - the three things that can limit a program on a GPU: compute, memory
#   bandwidth and overhead;
# - how to hold a measured rate against its limit, using a table of common
#   devices, and what a rate above 100 % means: a clock that did not wait,
#   or, for memory, a cache;
# - how a roofline draws the measured points against both limits at once.
#   The remedies for each limit follow in [12](12-remedies.ipynb).
#
# **What you need**
#
# - [09 – Timing a GPU](09-timing-a-gpu.ipynb) for `benchmark`; the examples
#   come from [04](04-asynchrony-and-transfers.ipynb) and
#   [07](07-exercises.ipynb). A GPU is optional: on a CPU every cell runs, and
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
# ## Three limits
#
# Any piece of GPU work is held back by one of three things:
#
# - **compute**: the arithmetic units are busy all the time. A large matrix
#   product is the example: for n x n matrices it does about 2n³ operations on
#   3n² numbers, so each number fetched from memory is used many times.
# - **memory bandwidth**: the arithmetic units wait for data. `x * 2` does one
#   multiplication per 8 bytes it reads and writes; the memory, not the
#   arithmetic, sets its speed.
# - **overhead**: the GPU waits for the host. The small copies of 04, the
#   small products of 07 and a `.item()` at every step spend their time in
#   Python, launches and synchronizing while the GPU idles.
#
# To tell which holds, turn a time into a *rate* (operations or bytes per
# second) and hold it against the device's limit. Work near a limit gets
# faster only with less work or faster arithmetic. Work far below both is
# often paying overhead, or runs kernels too small to fill the GPU, which is
# then busy with most of its units idle. A host clock cannot tell the two
# apart; the GPU column of [10](10-profiler-and-meta.ipynb)'s profiler can:
# kernels whose GPU time fills the step kept the GPU busy.
#
# ## The limits of common devices
#
# | device (name PyTorch reports) | float32 TFLOP/s | TF32 TFLOP/s | float16 / bfloat16 TFLOP/s | memory GB/s | host link GB/s (PCIe x16) |
# | --- | --- | --- | --- | --- | --- |
# | H200 SXM (`NVIDIA H200`) | 67 | 495 | 989 | 4,800 | 63 (5.0) |
# | H200 NVL (`NVIDIA H200 NVL`) | 60 | 418 | 835 | 4,800 | 63 (5.0) |
# | H100 SXM (`NVIDIA H100 80GB HBM3`) | 67 | 495 | 989 | 3,350 | 63 (5.0) |
# | H100 NVL (`NVIDIA H100 NVL`) | 60 | 418 | 835 | 3,900 | 63 (5.0) |
# | H100 PCIe (`NVIDIA H100 PCIe`) | 51 | 378 | 756 | 2,000 | 63 (5.0) |
# | A100 SXM4 80 GB (`NVIDIA A100-SXM4-80GB`) | 19.5 | 156 | 312 | 2,039 | 31.5 (4.0) |
# | A100 SXM4 40 GB, Colab's A100 (`NVIDIA A100-SXM4-40GB`) | 19.5 | 156 | 312 | 1,555 | 31.5 (4.0) |
# | L4 (`NVIDIA L4`) | 30.3 | 60 | 121 | 300 | 31.5 (4.0) |
# | RTX 4090 (`NVIDIA GeForce RTX 4090`) | 82.6 | 82.6 | 165 | 1,008 | 31.5 (4.0) |
# | RTX 3090 (`NVIDIA GeForce RTX 3090`) | 35.6 | 35.6 | 71 | 936 | 31.5 (4.0) |
# | V100 SXM2, PCIe (`Tesla V100-SXM2-16GB`, `-PCIE-16GB`, 32GB too) | 15.7, 14 | none | 125, 112 / none | 900 | 15.8 (3.0) |
# | T4 (`Tesla T4`) | 8.1 | none | 65 / none | 320 | 15.8 (3.0) |
# | P100, Kaggle's (`Tesla P100-PCIE-16GB`) | 9.3 | none | 18.7 / none | 732 | 15.8 (3.0) |
# | Apple M2, 10-core GPU (`Apple M2`) | 3.6 | none | none | 100 (shared) | none: one memory |
# | a CPU (an estimate) | threads × 3 GHz × 32 or 64 | none | none | about 50 | none |
#
# The GPU figures are the makers' own (NVIDIA's datasheets and GeForce
# architecture papers, Apple's M2 launch). NVIDIA's sheets give the tensor-core
# figure for "2:4 sparse" matrices, which a plain product never has, some with
# the dense one beside it and some only with a footnote; the table gives the
# dense one, half the sparse, and for GeForce cards the one that adds up in
# float32, as PyTorch does. float16 and bfloat16 share a figure, but the V100
# and T4 take float16 only, and the P100 has no tensor cores. An 8-core M2 GPU
# has 8/10 of the figure, under the same name. The host link is the card's
# PCIe slot, one way; an older slot gives less. Memory rates count bytes read
# plus bytes written.
#
# No program reaches a datasheet peak. Measured at their best, large products
# reach about 80 % of it on an A100 or H100, so 70 % is already good work. A
# power-capped card sustains much less: a T4 (70 W) slows its clock in long
# products, so 40 to 60 % is normal there.
#
# A CPU has no such sheet here, so the last row is an **estimate**: each thread
# at about 3 GHz doing 32 float32 operations per cycle (two fused multiply-adds
# on 8 numbers, AVX2), or 64 with AVX-512; memory about 50 GB/s, two channels
# of DDR4-3200. A rate above the estimate only means this machine beats it. A
# rate above a datasheet figure is a mis-measurement: for operations, a clock
# that did not wait. For memory it can also be a cache, faster than the
# memory, so this lesson moves 256 MiB on every device, more than caches hold
# ([09](09-timing-a-gpu.ipynb)).

# %% tags=["nbval-ignore-output"]
import subprocess
import time

# the table's columns (TFLOP/s, GB/s), None where it has none; from NVIDIA's
# datasheets, its Ada and GA102 papers (GeForce) and Apple's M2 launch
LIMITS = {
    "NVIDIA H200": dict(float32=67, float16=989, memory=4800, link=63),
    "NVIDIA H200 NVL": dict(float32=60, float16=835, memory=4800, link=63),
    "NVIDIA H100 80GB HBM3": dict(float32=67, float16=989, memory=3350, link=63),
    "NVIDIA H100 NVL": dict(float32=60, float16=835, memory=3900, link=63),
    "NVIDIA H100 PCIe": dict(float32=51, float16=756, memory=2000, link=63),
    "NVIDIA A100-SXM4-80GB": dict(float32=19.5, float16=312, memory=2039, link=31.5),
    "NVIDIA A100-SXM4-40GB": dict(float32=19.5, float16=312, memory=1555, link=31.5),
    "NVIDIA L4": dict(float32=30.3, float16=121, memory=300, link=31.5),
    "NVIDIA GeForce RTX 4090": dict(float32=82.6, float16=165, memory=1008, link=31.5),
    "NVIDIA GeForce RTX 3090": dict(float32=35.6, float16=71, memory=936, link=31.5),
    "Tesla V100-SXM2-16GB": dict(float32=15.7, float16=125, memory=900, link=15.8),
    "Tesla V100-SXM2-32GB": dict(float32=15.7, float16=125, memory=900, link=15.8),
    "Tesla V100-PCIE-16GB": dict(float32=14, float16=112, memory=900, link=15.8),
    "Tesla V100-PCIE-32GB": dict(float32=14, float16=112, memory=900, link=15.8),
    "Tesla T4": dict(float32=8.1, float16=65, memory=320, link=15.8),
    "Tesla P100-PCIE-16GB": dict(float32=9.3, float16=18.7, memory=732, link=15.8),
    "Apple M2": dict(float32=3.6, float16=None, memory=100, link=None),
}

device = d2l_gpu.try_gpu()
torch.set_num_threads(1)  # one CPU thread, as in 09
if device.type == "cuda":
    name = torch.cuda.get_device_name(device)
elif device.type == "mps":  # the chip's name, as macOS reports it
    ask = ["sysctl", "-n", "machdep.cpu.brand_string"]
    name = subprocess.run(ask, capture_output=True, text=True).stdout.strip()
else:
    name = "this CPU"
if name in LIMITS:
    limits, source = LIMITS[name], "datasheet"
elif device.type == "cpu":
    per_cycle = 64 if "AVX512" in torch.backends.cpu.get_cpu_capability() else 32
    float32 = torch.get_num_threads() * 3e9 * per_cycle / 1e12
    limits, source = dict(float32=float32, float16=None, memory=50, link=None), "estimate"
else:
    limits, source = {}, None
units = dict(float32="TFLOP/s", float16="TFLOP/s", memory="GB/s", link="GB/s")
known = ", ".join(f"{k} {v:.4g} {units[k]}" for k, v in limits.items() if v is not None)
if source:
    print(f"{name} ({device}), limits from the {source}: {known}")
else:
    print(f"{name} ({device}) is not in the table: no limits known, so no roof to draw")


def against_limit(what, rate, unit, kind):
    # print a rate as a fraction of the device's limit of that kind
    limit = limits.get(kind)
    if limit is None:
        print(f"{what}: {rate:.3g} {unit}; no {kind} limit known for {name}")
        return
    share = f"{100 * rate / limit:.1f} % of {limit:.4g} ({kind}, {source})"
    line = f"{what}: {rate:.3g} {unit} = {share}"
    if rate > limit and source == "estimate":
        line += "\n  above the estimate: this machine beats it, or the data sat in a cache"
    elif rate > limit and kind == "memory":
        line += "\n  above 100 %: the data sat in a cache, or the clock did not wait for the device"
    elif rate > limit:
        line += "\n  above 100 %: a mis-measurement, the clock did not wait for the device"
    print(line)


# %% [markdown]
# ## Compute: a large product, and a clock that did not wait
#
# The cell times an n x n product (2n³ operations) with `benchmark` and prints
# its rate against the float32 limit. Then it makes a mistake often published:
# it times ten products with a plain clock that does not wait for the device.
# On a GPU that clock measures only the launches, and the "rate" comes out far
# above 100 % of the datasheet. On a CPU the work happens inside each call, so
# the two rates are close.
#
# No GPU has run this cell yet, nor any CUDA branch of this lesson.

# %% tags=["nbval-ignore-output", "key-result"]
n = 512 if device.type == "cpu" else 8192
a = torch.randn(n, n, device=device)
c = torch.empty_like(a)
flop = 2 * n**3


def float32_product():
    torch.matmul(a, a, out=c)


product = d2l_gpu.benchmark(float32_product, device=device, label=f"{n}x{n} product")
print(product)
against_limit("float32 product", flop / product.median / 1e12, "TFLOP/s", "float32")

d2l_gpu.synchronize(device)
start = time.perf_counter()
for _ in range(10):
    float32_product()
hasty = (time.perf_counter() - start) / 10  # read before the device is done
d2l_gpu.synchronize(device)
against_limit("same, clock not waiting", flop / hasty / 1e12, "TFLOP/s", "float32")

# %% [markdown]
# ## Memory bandwidth, and overhead
#
# A copy and `x * 2` each read every byte once and write it once. On a large
# tensor both should run at a similar rate, a fair fraction of the memory
# limit: the multiplication costs nothing next to moving the data. The same
# `x * 2` on 1 KiB is all overhead (Python, PyTorch's dispatcher, on a GPU a
# kernel launch of several microseconds), and its rate falls far below.

# %% tags=["nbval-ignore-output", "key-result"]
big = torch.ones(64 * 2**20, device=device)  # 256 MiB: more than a cache holds
big_out = torch.empty_like(big)
tiny = torch.randn(256, device=device)  # 1 KiB
tiny_out = torch.empty_like(tiny)
elementwise = {}  # FLOP per byte and FLOP/s of x * 2, for the roofline below
for what, tensor, fn in (
    ("copy, large", big, lambda: big_out.copy_(big)),
    ("x * 2, large", big, lambda: torch.mul(big, 2, out=big_out)),
    ("x * 2, 1 KiB", tiny, lambda: torch.mul(tiny, 2, out=tiny_out)),
):
    m = d2l_gpu.benchmark(fn, device=device, label=what)
    moved = 2 * tensor.nbytes  # read once, written once
    against_limit(f"{what} ({m.median * 1e6:,.1f} us)", moved / m.median / 1e9, "GB/s", "memory")
    if what.startswith("x * 2"):  # one multiplication per number
        elementwise[what] = (tensor.numel() / moved, tensor.numel() / m.median)

# %% [markdown]
# The host link is the third rate. On a CUDA GPU the cell copies 64 MiB from
# the host, once from ordinary memory and once from pinned memory
# ([04](04-asynchrony-and-transfers.ipynb)), and holds both against the
# link. On a CPU or an Apple GPU there is no link: host and device share one
# memory.

# %% tags=["nbval-ignore-output", "key-result"]
if device.type == "cuda":
    ordinary = torch.randn(16 * 2**20)  # 64 MiB
    pinned = ordinary.pin_memory()
    landing = torch.empty(ordinary.shape, device=device)
    for what, host in (("ordinary memory", ordinary), ("pinned memory", pinned)):
        m = d2l_gpu.benchmark(lambda h=host: landing.copy_(h), device=device)
        against_limit(f"host to device, {what}", ordinary.nbytes / m.median / 1e9, "GB/s", "link")
else:
    print(f"no host link on {device}: the host and the device share one memory")

# %% [markdown]
# Overhead shows in products too: 64 small products (64 x 64 each, as in
# [07](07-exercises.ipynb)), one after another, stay far below the float32
# limit.

# %% tags=["nbval-ignore-output", "key-result"]
stack = torch.randn(64, 64, 64, device=device)  # 64 matrices of 64 x 64
stack_out = torch.empty_like(stack)


def one_by_one():
    for m, out in zip(stack, stack_out, strict=True):
        torch.mm(m, m, out=out)


small = d2l_gpu.benchmark(one_by_one, device=device, label="64 small products")
print(small)
stack_flop = 64 * 2 * 64**3  # 64 products of 64 x 64
against_limit("64 small products", stack_flop / small.median / 1e12, "TFLOP/s", "float32")

# %% [markdown]
# A *roofline* draws both limits at once: rate against operations per byte
# moved, bandwidth the slope on the left, compute the flat roof on the right.
# They meet at the ridge (dotted); a dashed roof, where the table has one, is
# the 16-bit limit of [12](12-remedies.ipynb)'s remedy.

# %% mystnb={"image": {"alt": "Log-log roofline chart of rate in GFLOP/s against arithmetic intensity in FLOP per byte moved: the device's bandwidth slope meeting its flat float32 roof at a dotted ridge, a dashed 16-bit roof where the table has one, and the measured points: the large product, x * 2 on 256 MiB and on 1 KiB, the 64 small products, and a cross for the product timed by a clock that did not wait"}} tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt

product_per_byte = flop / (3 * a.nbytes)  # reads a twice, writes c: 3n² numbers
stack_per_byte = stack_flop / (3 * stack.nbytes)
measured = {  # name: (FLOP per byte moved, FLOP/s)
    "large product": (product_per_byte, flop / product.median),
    **elementwise,
    "64 small products": (stack_per_byte, stack_flop / small.median),
}
fig, ax = plt.subplots(figsize=(6, 3.6), dpi=200, layout="constrained")
highest = None  # FLOP/s
if limits.get("float32") and limits.get("memory"):
    intensity = torch.logspace(-2, 4, 200)
    for kind, style, what in (("float32", "k-", "float32"), ("float16", "k--", "16-bit")):
        if limits.get(kind):
            highest = limits[kind] * 1e12
            roof = torch.clamp(intensity * limits["memory"] * 1e9, max=highest)
            ax.loglog(intensity, roof / 1e9, style, label=f"{what} roof ({source})")
    ridge = limits["float32"] * 1e3 / limits["memory"]  # FLOP per byte
    ax.axvline(ridge, color="gray", linestyle=":", label=f"ridge, {ridge:.3g} FLOP/byte")
    ax.set_title(f"{name} ({device})")
else:  # a device not in the table still gets its points
    ax.set_title(f"{name} ({device}): not in the table, no datasheet roof")
for what, (per_byte, rate) in measured.items():
    ax.loglog(per_byte, rate / 1e9, "o", label=what)
# far above every roof, the hasty point would squash the rest
clipped = highest is not None and flop / hasty > 10 * highest
hasty_point = (product_per_byte, (10 * highest if clipped else flop / hasty) / 1e9)
label = "large product, clock not waiting" + (" (clipped)" if clipped else "")
ax.loglog(*hasty_point, "kx", markersize=10, zorder=1, label=label)  # drawn under the dots
if source == "datasheet" and flop / hasty > limits["float32"] * 1e12:
    note = "above the roof: a mis-measurement"
    ax.annotate(note, hasty_point, xytext=(-190, -4), textcoords="offset points")
ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
ax.set_ylabel("rate (GFLOP/s)")
ax.legend(fontsize="x-small")
plt.show()
plt.close(fig)

# %% [markdown]
# Points near the slope are bandwidth-bound, points near the roof
# compute-bound, points far below both (the tiny `x * 2`, the 64 small
# products) overhead-bound, or on a GPU too small to fill it. On a CPU the
# hasty cross sits by the careful point; on a GPU it lands far above it, and
# above the roof where the table gives one, where no real rate can be.

# %% [markdown]
# ## What this lesson showed
#
# - Work is limited by compute (large products), memory bandwidth (`x * 2`)
#   or overhead (small copies and products, a sync per step).
# - A rate held against its limit says which: the table gives dense datasheet
#   peaks, and a CPU gets an estimate. About 80 % is the practical ceiling,
#   less on a power-capped card. A rate above 100 % means the clock did not
#   wait or, for memory, that a cache served the data.
# - A roofline places each measured point against both limits at once.
#
# Next: [12 – Remedies](12-remedies.ipynb) for each limit, each measured.
