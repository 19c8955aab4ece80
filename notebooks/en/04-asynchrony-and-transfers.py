# %% [markdown]
# # Asynchrony and transfers: timing a GPU, and what moving data costs
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/05-asynchrony-and-transfers.ipynb)
#
# As run on an NVIDIA H200: [outputs](../gpu/nvidia-h200/en/05-asynchrony-and-transfers.ipynb) (earlier version).
#
# **What you will learn**
#
# - that a GPU runs behind Python's back, so a clock must wait for it: a
#   synchronized clock and CUDA events;
# - what moving data costs, measured with that kind of clock;
# - pinned memory and `non_blocking`: what they speed up, the race they open,
#   and pinned batches from a `DataLoader`.
#
# **What you need**
#
# - [03 – Tensors and GPUs](03-tensors-and-gpus.ipynb), whose side notes this
#   lesson measures; the previous lesson, [04 – GPU memory](04-gpu-memory.ipynb),
#   is not needed. A GPU is optional: without one every cell runs on the CPU
#   and the text says what a GPU shows.

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
# ## A GPU works behind Python's back
#
# When Python calls `torch.matmul` on a GPU tensor, PyTorch checks the
# arguments, puts a *kernel* (a program for the GPU) into the GPU's queue, and
# returns at once. Python runs ahead while the GPU works through the queue, like
# ordering coffee by phone and picking it up later: the result tensor exists
# straight away, its values arrive when the GPU gets there.
#
# That makes a naive clock wrong: it measures how long it took to *queue* the
# work. The cell below queues ten matrix products and reads the clock right
# after the loop and again after `d2l_gpu.synchronize(device)` (on CUDA,
# `torch.cuda.synchronize()`), which waits until the queue is empty. On the CPU
# the arithmetic happens inside each call, so both readings agree; on a GPU the
# first is far smaller.
#
# Every clock in this lesson keeps two habits. PyTorch computes on one CPU
# thread, so that on a small shared machine a timing does not depend on how soon
# other threads wake up (a GPU's own work is unaffected). And a few warm-up
# calls pay up front for what a first call costs: loading the GPU's code,
# setting up buffers.

# %% tags=["nbval-ignore-output", "key-result"]
import time

torch.set_num_threads(1)  # the one timing policy of this lesson
device = d2l_gpu.try_gpu()
n = 256 if device.type == "cpu" else 4096  # enough to keep a GPU busy
a = torch.randn(n, n, device=device)
c = torch.empty_like(a)
for _ in range(3):  # warm-up
    torch.matmul(a, a, out=c)
d2l_gpu.synchronize(device)

start = time.perf_counter()
for _ in range(10):
    torch.matmul(a, a, out=c)
queued = time.perf_counter() - start  # Python is done: the work is queued
d2l_gpu.synchronize(device)
finished = time.perf_counter() - start  # the device is done too
print(f"10 products of {n}x{n} matrices on {device}:")
print(f"  clock read when the loop returned: {queued * 1e3:8.2f} ms")
print(f"  clock read after synchronizing:    {finished * 1e3:8.2f} ms")
if finished > 2 * queued:
    meaning = "the loop returned long before the device finished: the work was queued"
else:
    meaning = "the work was done inside each call: nothing was left in a queue"
print(f"  the second reading is {finished / queued:.1f}x the first: {meaning}")

# %% [markdown]
# A CUDA GPU can also time itself. A `torch.cuda.Event` is a marker put into the
# queue; once the GPU has passed two of them, `elapsed_time` gives the
# milliseconds between them on the GPU's clock, leaving out Python's overhead.
# On a GPU it should nearly agree with a synchronized host clock around the same
# work.

# %% tags=["nbval-ignore-output"]
if device.type == "cuda":
    begin = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    # record() alone marks the current GPU's queue; name the products' queue,
    # which differs when D2L_DEVICE picks a GPU other than cuda:0.
    queue = torch.cuda.current_stream(device)
    d2l_gpu.synchronize(device)
    start = time.perf_counter()
    begin.record(queue)
    for _ in range(10):
        torch.matmul(a, a, out=c)
    end.record(queue)
    end.synchronize()  # wait until the GPU has passed the second marker
    host_ms = (time.perf_counter() - start) * 1e3
    gpu_ms = begin.elapsed_time(end)
    print(f"CUDA events:           10 products took {gpu_ms:.2f} ms on the GPU's clock")
    print(f"synchronized host clock around the same work: {host_ms:.2f} ms")
    print(f"events / host clock = {gpu_ms / host_ms:.3f}")
else:
    print(f"CUDA events need a CUDA GPU; on {device} the synchronized clock above is the answer.")

# %% [markdown]
# The same queue explains a puzzling kind of error. When a kernel fails, say an
# index out of range inside the GPU, Python has usually moved on, and the error
# surfaces at a later line that waits for the GPU (a `print`, an `.item()`), far
# from its cause. Setting `CUDA_LAUNCH_BLOCKING=1` in the environment before
# Python starts makes every launch wait for its kernel, so the error points at
# its line. It slows everything down: use it to find a bug, not to train.
#
# One clock reading is noisy, so the cells below leave the clock to two helpers.
# `d2l_gpu.benchmark` times one call: it warms up, sizes a *block* of calls so
# that reading the clock costs little next to it, synchronizes before every
# reading, and reports the median time per call with the interquartile range
# (IQR) of the blocks. `d2l_gpu.compare` times two calls in alternating rounds
# (first, second, second, first, ...), so that a slow phase of the machine falls
# on both, and prints a verdict: they agree when the median ratio of their
# blocks lies within a tolerance of 1; one is clearly slower only when the
# middle half of the per-round ratios lies beyond it. `make bench` checks
# `benchmark` against PyTorch's standard instrument,
# `torch.utils.benchmark.Timer`, and that `compare` finds two identical calls in
# agreement.
#
# ## Side notes, measured
#
# [03](03-tensors-and-gpus.ipynb) named three costs of moving data: a transfer
# is slow next to the arithmetic it feeds, every transfer has a fixed cost, and
# reading a result back makes the CPU wait. The cells below measure each. They
# ask whether one cost is a *multiple* of the other, so they pass
# `tolerance=0.5`: a gap under 1.5x would not change the code. **What the
# numbers mean here:** the stored outputs come from a CPU-only machine, where a
# "transfer" is a copy within main memory: the fixed cost per call and the cost
# of `.item()` still show, but a copy is not slow next to computing. On a GPU
# the cells compare the bus against the GPU, and the copy usually costs more
# than the computation it feeds.

# %% tags=["nbval-ignore-output", "key-result"]
results = {}  # every measurement by label, for the plot


def side_by_side(first, second, labels):
    """Compare second against first on the chosen device; print both and keep them."""
    comparison = d2l_gpu.compare(first, second, labels=labels, device=device, tolerance=0.5)
    results.update({m.label: m for m in (comparison.first, comparison.second)})
    print(comparison)
    return comparison


host = torch.randn(512, 512)
on_device = host.to(device)
landing = torch.empty_like(on_device)  # where each copy lands, allocated once
out = torch.empty_like(on_device)
print(f"copying 1 MiB from the host to {device}, against work done with it on {device}:")
side_by_side(
    lambda: torch.mul(on_device, 2, out=out),
    lambda: landing.copy_(host),
    ("x * 2 on device", "copy 1 MiB to device"),
)
side_by_side(
    lambda: torch.matmul(on_device, on_device, out=out),
    lambda: landing.copy_(host),
    ("x @ x on device", "copy 1 MiB to device"),
)

# %% [markdown]
# Copies land in memory allocated beforehand and computations write into a ready
# output (`out=`), so the clock sees transfer and arithmetic, not the memory
# allocator. The elementwise `x * 2` reads and writes as much memory as the copy
# moves; the matrix product does about a thousand operations per element. On a
# GPU, expect the copy to take longer than both.
#
# Next, the same MiB as 256 pieces of 4 KiB, copied one by one, against one copy
# of the whole:

# %% tags=["nbval-ignore-output"]
pieces = [torch.randn(1024) for _ in range(256)]
whole = torch.cat(pieces)
landings = [torch.empty(1024, device=device) for _ in pieces]
whole_landing = torch.empty(whole.shape, device=device)
side_by_side(
    lambda: whole_landing.copy_(whole),
    lambda: [d.copy_(p) for d, p in zip(landings, pieces, strict=True)],
    ("1 x 1 MiB copy", "256 x 4 KiB copy"),
)

# %% [markdown]
# Reading values back one at a time is the same mistake in the other direction:
# a training loop that calls `loss.item()` at every step makes the CPU wait for
# the GPU each time. Here are 256 `.item()` calls against one `.tolist()`:

# %% tags=["nbval-ignore-output"]
values = torch.rand(256, device=device)
side_by_side(
    lambda: values.tolist(),
    lambda: [v.item() for v in values],
    ("1 x .tolist()", "256 x .item()"),
)

# %% [markdown]
# On the CPU the loop pays for creating a tensor per element and for a trip
# through PyTorch's dispatcher, the layer that picks the right implementation
# for each call. On a GPU each `.item()` adds a wait for the GPU and a tiny copy
# over the bus, so the gap grows.
#
# The plot shows the medians on a log scale, with bars from the first to the
# third quartile of the blocks.

# %% tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt

labels = list(results)
medians = [results[k].median * 1e6 for k in labels]
spread = [
    [(results[k].median - results[k].q1) * 1e6 for k in labels],
    [(results[k].q3 - results[k].median) * 1e6 for k in labels],
]
fig, ax = plt.subplots(figsize=(6, 2.6))
ax.errorbar(medians, labels, xerr=spread, fmt="o", color="tab:blue", capsize=3)
ax.set_xscale("log")
ax.set_xlabel(f"microseconds per call on {device} (median, q1 to q3)")
ax.invert_yaxis()
ax.grid(axis="x", which="both", alpha=0.3)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## A step beyond the book: pinned memory and `non_blocking`
#
# A copy from the host to a CUDA GPU is done by the GPU's copy engine, which can
# only read page-locked ("pinned") memory. From ordinary memory the data first
# goes through a pinned staging buffer and the CPU waits, so `non_blocking=True`
# gains nothing. From memory pinned in advance (`tensor.pin_memory()`, or
# `pin_memory=True` in a `DataLoader`) the copy uses the bus directly, and with
# `non_blocking=True` it is only queued: Python carries on while the data moves.
# A later operation on the GPU waits for it automatically; a clock must
# synchronize first, which `d2l_gpu.compare` does. The cell pins only when the
# helpers chose a CUDA GPU; elsewhere it calls no CUDA API and says so.

# %% tags=["nbval-ignore-output", "key-result"]
GiB = 2**30
batch = torch.randn(2048, 1024)  # 8 MiB
if device.type == "cuda":
    pinned = batch.pin_memory()
    landing = torch.empty(batch.shape, device=device)
    print(f"copying 8 MiB to {device}:")
    memories = side_by_side(
        lambda: landing.copy_(pinned, non_blocking=True),
        lambda: landing.copy_(batch),
        ("from pinned memory", "from ordinary memory"),
    )
    for m in (memories.first, memories.second):
        print(f"{m.label}: {batch.nbytes / m.median / GiB:.1f} GiB/s")
else:
    print(f"The helpers chose {device}, not a CUDA GPU: nothing pinned, no CUDA API called.")

# %% [markdown]
# On a CUDA GPU the pinned copy is typically faster; its real benefit is that
# the CPU can prepare the next batch while the current one is on its way.
#
# The other direction hides a trap. A copy from the GPU into pinned host memory
# with `non_blocking=True` is also only queued, but now the *CPU* reads the
# result, and nothing makes it wait. (The same holds for
# `.to("cpu", non_blocking=True)`, which allocates the pinned result for you.)
# The cell below allocates the host buffer, filled with -1, *before* queueing
# any work, since allocating pinned memory can itself make the CPU wait for the
# GPU. It queues twenty products of a matrix of ones (each element equals `n`),
# then the copy back, and reads the *last* element the copy writes, at once and
# after synchronizing. On the CPU both reads are right, as nothing is queued; on
# a CUDA GPU the early read should find the old -1. A race can also come out
# right, when the copy happens to land first, so a correct-looking early read
# proves nothing: only synchronizing makes the read safe.

# %% tags=["nbval-ignore-output", "key-result"]
pin = device.type == "cuda"  # pinned memory serves CUDA copies only
ones = torch.ones(n, n, device=device)
product = torch.empty_like(ones)
result = torch.full((n, n), -1.0, pin_memory=pin)  # the host buffer, before any work
d2l_gpu.synchronize(device)  # start from an empty queue
for _ in range(20):  # twice the work the first cell timed
    torch.matmul(ones, ones, out=product)  # every element equals n
result.copy_(product, non_blocking=True)  # on a GPU: queued behind the products
too_early = result[-1, -1].item()  # result is a CPU tensor: this does not wait
d2l_gpu.synchronize(device)
print(f"last element read before synchronizing: {too_early} (expected {float(n)}, old value -1.0)")
print(f"last element read after synchronizing:  {result[-1, -1].item()}")
if too_early != n:
    print("the early read was wrong: the copy had not landed yet")
elif device.type == "cpu":
    print("the early read was right: on the CPU nothing is queued, so there was no race")
else:
    print("the early read came out right this time: the race went the lucky way, proving nothing")

# %% [markdown]
# A `DataLoader` with `pin_memory=True` hands out batches already in pinned
# memory, ready for `non_blocking=True` copies. The loop below asks for them
# only when the helpers chose a CUDA GPU, and checks every batch.
# `num_workers=0` loads batches in this process to keep the example simple; real
# training also uses worker processes.

# %% tags=["nbval-ignore-output"]
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(512, 32), torch.randn(512, 1))
loader = DataLoader(data, batch_size=64, pin_memory=pin, num_workers=0)
weights = torch.zeros(32, 1, device=device)
total = torch.zeros((), device=device)
pinned_batches = 0
for features, targets in loader:
    if pin:
        pinned_batches += features.is_pinned() and targets.is_pinned()
    features = features.to(device, non_blocking=True)
    targets = targets.to(device, non_blocking=True)
    total += ((features @ weights - targets) ** 2).mean()  # queued, not waited for
if pin:
    print(f"{len(loader)} batches, {pinned_batches} of them pinned")
else:
    print(f"{len(loader)} batches in ordinary memory: the helpers chose {device}, not a CUDA GPU")
print(f"mean loss of the zero model: {total.item() / len(loader):.2f}")  # one wait, at the end

# %% [markdown]
# ## What this lesson showed
#
# - A GPU works through a queue while Python runs ahead: a clock must wait for
#   the device (`d2l_gpu.synchronize`) before it is read, and CUDA events time
#   the work on the GPU's own clock. `CUDA_LAUNCH_BLOCKING=1` makes errors
#   point at their line.
# - `d2l_gpu.benchmark` and `d2l_gpu.compare` time that way for you, and
#   `compare` judges two costs by one rule, with a stated tolerance.
# - The side notes, measured: a copy against computation, many small copies
#   against one, `.item()` in a loop against one transfer, each with its verdict.
# - Pinned memory lets a copy to a CUDA GPU run while the CPU goes on; a
#   non-blocking copy back to the host must be synchronized before it is read,
#   and an early read that looks right proves nothing. A `DataLoader` can hand
#   out pinned batches.
#
# Next: [06 – Neural networks and GPUs](06-neural-networks-and-gpus.ipynb) puts a
# whole model on a device.
