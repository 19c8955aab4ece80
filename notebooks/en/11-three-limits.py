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
#   The remedies, one for each limit, follow in [12](12-remedies.ipynb).
#
# **What you need**
#
# - [09 – Timing a GPU](09-timing-a-gpu.ipynb) for `benchmark`; the examples
#   come from [04 – Asynchrony and transfers](04-asynchrony-and-transfers.ipynb)
#   and [07 – Exercises](07-exercises.ipynb). A GPU is optional: on a CPU
#   every cell runs, and the text says what a GPU shows.

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
# apart; the GPU column of [10](10-profiler-and-meta.ipynb)'s profiler can.
# Kernels whose GPU time adds up to nearly the whole step kept the GPU busy;
# if they add up to much less, the GPU waited for the host.
#
# ## The limits of common devices
#
# | device (name PyTorch reports) | float32 TFLOP/s | TF32 TFLOP/s | float16 / bfloat16 TFLOP/s | memory GB/s | host link GB/s |
# | --- | --- | --- | --- | --- | --- |
# | H200 SXM (`NVIDIA H200`) | 67 | 495 | 989 | 4,800 | 63 (PCIe 5.0 x16) |
# | H200 NVL (`NVIDIA H200 NVL`) | 60 | 418 | 835 | 4,800 | 63 (PCIe 5.0 x16) |
# | H100 SXM (`NVIDIA H100 80GB HBM3`) | 67 | 495 | 989 | 3,350 | 63 (PCIe 5.0 x16) |
# | H100 NVL (`NVIDIA H100 NVL`) | 60 | 418 | 835 | 3,900 | 63 (PCIe 5.0 x16) |
# | H100 PCIe (`NVIDIA H100 PCIe`) | 51 | 378 | 756 | 2,000 | 63 (PCIe 5.0 x16) |
# | A100 SXM4 80 GB (`NVIDIA A100-SXM4-80GB`) | 19.5 | 156 | 312 | 2,039 | 31.5 (PCIe 4.0 x16) |
# | A100 SXM4 40 GB, Colab's A100 (`NVIDIA A100-SXM4-40GB`) | 19.5 | 156 | 312 | 1,555 | 31.5 (PCIe 4.0 x16) |
# | L4 (`NVIDIA L4`) | 30.3 | 60 | 121 | 300 | 31.5 (PCIe 4.0 x16) |
# | T4 (`Tesla T4`) | 8.1 | none | 65 / none | 320 | 15.8 (PCIe 3.0 x16) |
# | Apple M2, 10-core GPU (`Apple M2`) | 3.6 | none | none | 100 (shared) | none: one memory |
# | a CPU (an estimate) | threads × 3 GHz × 32 or 64 | none | none | about 50 | none |
#
# The GPU figures are the makers' own: NVIDIA's datasheets for the H200, H100,
# A100, L4 and T4, per GPU, and Apple's figures for the M2 at its launch.
# NVIDIA prints tensor-core figures twice, the larger one for "2:4 sparse"
# matrices that a plain product never has; the table gives the dense figures,
# half the sparse ones. float16 and bfloat16 share a figure, but the T4's
# tensor cores take float16 only, and it has no TF32. Apple gives no figure
# for either; an M2 with the 8-core GPU reports the same name and has 8/10 of
# the figure. The host link is the card's PCIe slot, one way; a host with an
# older slot gives less. Memory rates count bytes read plus bytes written.
#
# No program reaches a datasheet peak. Measured at their best, large products
# reach about 80 % of it on an A100 or H100, so 70 % is already good work.
#
# A CPU has no such sheet here, so the last row is an **estimate**, said to be
# one: each thread at about 3 GHz doing 32 float32 operations per cycle (two
# fused multiply-adds on 8 numbers, AVX2), or 64 with AVX-512; memory about
# 50 GB/s, two channels of DDR4-3200 as in many laptops. A rate above the
# estimate only means this machine beats it, or the data sat in a cache. A
# rate above a datasheet figure is a mis-measurement: for operations, a clock
# that did not wait. For memory it can also be a cache: recent GPUs keep tens
# of megabytes in their L2 cache, which serves data faster than the memory
# can, so this lesson moves 256 MiB on a GPU.

# %% tags=["nbval-ignore-output"]
import subprocess
import time

# the table's float32 (TFLOP/s), memory and host link (GB/s) columns; None: no link
LIMITS = {
    "NVIDIA H200": dict(float32=67, memory=4800, link=63),
    "NVIDIA H200 NVL": dict(float32=60, memory=4800, link=63),
    "NVIDIA H100 80GB HBM3": dict(float32=67, memory=3350, link=63),
    "NVIDIA H100 NVL": dict(float32=60, memory=3900, link=63),
    "NVIDIA H100 PCIe": dict(float32=51, memory=2000, link=63),
    "NVIDIA A100-SXM4-80GB": dict(float32=19.5, memory=2039, link=31.5),
    "NVIDIA A100-SXM4-40GB": dict(float32=19.5, memory=1555, link=31.5),
    "NVIDIA L4": dict(float32=30.3, memory=300, link=31.5),
    "Tesla T4": dict(float32=8.1, memory=320, link=15.8),
    "Apple M2": dict(float32=3.6, memory=100, link=None),
}

device = d2l_gpu.try_gpu()
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
    limits, source = dict(float32=float32, memory=50, link=None), "estimate"
else:
    limits, source = {}, None
units = dict(float32="TFLOP/s", memory="GB/s", link="GB/s")
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
# A product of two n x n matrices takes about 2n³ floating-point operations.
# The cell times one with `benchmark` and prints its rate against the float32
# limit. Then it makes a mistake often published: it times ten products with
# a plain clock that does not wait for the device. On a GPU that clock
# measures only the launches, and the "rate" comes out far above 100 % of the
# datasheet; the line says so. On a CPU the work happens inside each call, so
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
big = torch.randn((8 if device.type == "cpu" else 64) * 2**20, device=device)  # 32 or 256 MiB
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
# Overhead shows in products too. The 64 small products below (64 x 64 each,
# as in [07](07-exercises.ipynb)) run one after another, and their rate
# against the float32 limit shows how far below it small pieces of work stay.

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
# Look at where each point sits under the roof, and how far below.

# %% tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt

product_per_byte = flop / (3 * a.nbytes)  # reads a twice, writes c: 3n² numbers
stack_per_byte = stack_flop / (3 * stack.nbytes)
measured = {  # name: (FLOP per byte moved, FLOP/s)
    "large product": (product_per_byte, flop / product.median),
    **elementwise,
    "64 small products": (stack_per_byte, stack_flop / small.median),
}
fig, ax = plt.subplots(figsize=(6, 3.6), layout="constrained")
if limits.get("float32") and limits.get("memory"):
    intensity = torch.logspace(-2, 4, 200)
    roof = torch.clamp(intensity * limits["memory"] * 1e9, max=limits["float32"] * 1e12)
    ax.loglog(intensity, roof / 1e9, "k-", label=f"float32 roof ({source})")
    ax.set_title(f"{name} ({device})")
else:  # a device not in the table still gets its points
    ax.set_title(f"{name} ({device}): not in the table, no datasheet roof")
for what, (per_byte, rate) in measured.items():
    ax.loglog(per_byte, rate / 1e9, "o", label=what)
hasty_point = (product_per_byte, flop / hasty / 1e9)
label = "large product, clock not waiting"
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
#   peaks for common GPUs and an estimate, said to be one, for a CPU. About
#   80 % is the practical ceiling. A rate above 100 % means the clock did not
#   wait or, for memory, that a cache served the data.
# - A roofline places each measured point against both limits at once.
#
# Next: [12 – Remedies](12-remedies.ipynb), one for each limit, each measured.
