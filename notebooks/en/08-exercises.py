# %% [markdown]
# # Exercises: four questions about GPUs, answered by measuring
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/08-exercises.ipynb)
#
# **What you will learn**
#
# - how the time of a matrix product grows with its size on a CPU and on a GPU,
#   and why a tiny product gains nothing from a GPU;
# - how to save a model's parameters on a GPU and load them anywhere, safely;
# - what `.item()` in a loop really costs, and how to log without paying it;
# - what running two products at once on two devices buys, and what one device
#   or a CPU can and cannot tell us about it.
#
# **What you need**
#
# - the earlier notebooks of this section, above all
#   [03 – Tensors and GPUs](03-tensors-and-gpus.ipynb); a GPU is optional: every
#   cell runs on a CPU and says what it measured there.

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
# The book leaves these exercises open; here each answer is a few cells of plain
# PyTorch that you can change and run again. Every time comes from
# `d2l_gpu.benchmark(fn, *args, device=...)`: it waits for the device before
# reading the clock, warms up, calls `fn` in repeated blocks and returns a
# `Measurement` whose `median` is the typical time per call and whose quartiles
# `q1` and `q3` bound the middle half of the blocks. The plots draw the median
# with an error bar from `q1` to `q3`.
#
# Your numbers will differ from the stored ones, and should: they describe your
# machine. The stored outputs come from a small shared CPU with two cores and no GPU.

# %%
import os
import pickle
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import matplotlib.pyplot as plt
from torch import nn

device = d2l_gpu.try_gpu()  # the first GPU, or the CPU when there is none


def error_bars(measurements):
    """The distances from each median down to q1 and up to q3, as plt.errorbar wants them."""
    return [[m.median - m.q1 for m in measurements], [m.q3 - m.median for m in measurements]]


def verdict(m, base):
    """Is m faster or slower than base? Only when the medians differ by more than the spread."""
    if min(m.runs, base.runs) < 3:
        return f"too few runs to judge ({min(m.runs, base.runs)})"
    if abs(m.median - base.median) <= max(m.iqr, base.iqr):
        return "no difference beyond the spread (IQR)"
    return "faster" if m.median < base.median else "slower"


# %% [markdown]
# ## Exercise 1: large and small matrix products
#
# We time one n x n float32 product for a range of n, on the CPU and, if there is
# one, on the GPU. The smallest, n = 4, is the "task with little computation":
# 128 multiplications and additions. An n x n product takes about 2n³ floating-point
# operations, so the median time also gives the rate in GFLOP/s.

# %% tags=["nbval-ignore-output"]
sizes = [4, 16, 64, 256, 512] if device.type == "cpu" else [4, 16, 64, 256, 1024, 2048]
targets = [d2l_gpu.cpu()] if device.type == "cpu" else [d2l_gpu.cpu(), device]
times = {}
for target in targets:
    for n in sizes:
        x = torch.randn(n, n, device=target)
        times[target, n] = d2l_gpu.benchmark(torch.mm, x, x, device=target, min_run_time=0.05)

print(f"{'device':>8} {'n':>5} {'median':>12} {'middle half (q1 to q3)':>26} {'GFLOP/s':>9}")
for (target, n), m in times.items():
    spread = f"{m.q1 * 1e6:,.1f} to {m.q3 * 1e6:,.1f} us"
    rate = 2 * n**3 / m.median / 1e9
    print(f"{target!s:>8} {n:>5} {m.median * 1e6:>9,.1f} us {spread:>26} {rate:>9.2f}")

# %% tags=["nbval-ignore-output", "key-result"]
if len(targets) == 2:
    for n in sizes:
        on_cpu, on_gpu = times[targets[0], n], times[targets[1], n]
        speed = on_cpu.median / on_gpu.median
        print(f"n = {n:>4}: {targets[1]} is {speed:,.2f}x as fast as the CPU: {verdict(on_gpu, on_cpu)}")
else:
    print("no GPU: nothing to compare; with one, this cell prints the GPU/CPU ratio for each n")

# %% tags=["nbval-ignore-output"]
fig, ax = plt.subplots(figsize=(6, 3.5))
for target in targets:
    ms = [times[target, n] for n in sizes]
    medians = [m.median for m in ms]
    ax.errorbar(sizes, medians, yerr=error_bars(ms), marker="o", capsize=3, label=str(target))
ax.set(xscale="log", yscale="log", xlabel="n (log scale)", ylabel="seconds (log scale)")
ax.set_title("One n x n product: median, bars from q1 to q3")
ax.legend()
plt.show()

# %% [markdown]
# **Reading the curve.** Both axes are logarithmic, so a straight line of slope 3
# would mean the time grows as n³, as the arithmetic does. For small n the curve
# is nearly flat instead: the product is so small that the fixed cost of every call
# (Python, PyTorch's dispatcher, choosing and calling a BLAS routine) is most of
# the time. Only for large n does the arithmetic dominate and the rate approach
# what the hardware can do.
#
# A GPU adds its own fixed cost to every call: launching a kernel and, to read a
# result, waiting for it. For the 4 x 4 product that overhead is all there is, so
# the GPU is no faster than the CPU there, and often slower. For large n its
# thousands of arithmetic units have enough work and it pulls ahead, usually by
# more than an order of magnitude; the table above prints the ratio measured on
# your machine. (On NVIDIA GPUs PyTorch runs float32 products in full float32
# unless you allow the faster TF32 format with
# `torch.set_float32_matmul_precision("high")`.) The lesson for code: give a GPU
# large pieces of work, not many small ones.

# %% [markdown]
# ## Exercise 2: reading and writing parameters on a GPU
#
# Save the `state_dict` (the parameter tensors, not the Python object) and load it
# with `weights_only=True`, which rebuilds tensors and plain containers and refuses
# any other Python object. That greatly restricts what a file from elsewhere can
# do, but it is a safeguard, not a sandbox: before torch 2.6 a known bypass let a
# crafted file run code anyway. Keep torch current and load files you trust. The
# file keeps, for every tensor, the device it was saved from; `map_location` tells
# `torch.load` where to put the tensors instead. Files go to a temporary folder.

# %%
net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
original = {name: t.cpu() for name, t in net.state_dict().items()}  # a copy to compare with

with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "net.pt"
    torch.save(net.state_dict(), path)
    loads = {
        "no map_location": torch.load(path, weights_only=True),
        "map_location='cpu'": torch.load(path, map_location="cpu", weights_only=True),
    }

for how, state in loads.items():
    exact = state.keys() == original.keys() and all(
        torch.equal(state[name].cpu(), t) for name, t in original.items()
    )
    where = sorted({str(t.device) for t in state.values()})
    print(f"{how:<20} tensors on {where}, every tensor exact: {exact}")

clone = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 10))
clone.load_state_dict(loads["map_location='cpu'"])  # a model on the CPU, from a GPU's file
pairs = zip(net.parameters(), clone.parameters(), strict=True)
print("the CPU copy of the model is exact:", all(torch.equal(p.cpu(), q) for p, q in pairs))

# %% [markdown]
# Without `map_location`, every tensor goes back to the device it came from, say
# `cuda:0`; on a machine without that device the load fails. With a GPU, the next
# cell loads onto the device this lesson uses. Without one, it asks for `cuda:0`,
# which runs the check a GPU's file would meet, and shows the error (the stored run
# had no GPU to save from); it skips that when `D2L_DEVICE` is set, since asking
# would touch a GPU the variable leaves out. Saving the whole model object
# instead of its `state_dict` shows what `weights_only=True` protects against.

# %% tags=["nbval-ignore-output"]
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "net.pt"
    torch.save(net.state_dict(), path)
    if device.type != "cpu":  # onto the chosen device, never onto another GPU
        state = torch.load(path, map_location=device, weights_only=True)
        print(f"loaded onto {device}:", sorted({str(t.device) for t in state.values()}))
    elif os.environ.get("D2L_DEVICE"):
        print("D2L_DEVICE is set: not asking for cuda:0, which this run must leave alone")
    else:  # the helpers found no GPU at all, so CUDA's check fails before any data moves
        try:
            torch.load(path, map_location="cuda:0", weights_only=True)
        except RuntimeError as error:
            print(f"{type(error).__name__}: {str(error).splitlines()[0]}")

# %%
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "whole-model.pt"
    torch.save(net, path)  # pickles the Python object, classes and all
    try:
        torch.load(path, weights_only=True)
    except pickle.UnpicklingError as error:
        reason = [line.strip() for line in str(error).splitlines() if "Unsupported global" in line]
        print(f"{type(error).__name__}: {reason[0].split(' was ')[0] if reason else error}")

# %% [markdown]
# So the safe recipe is: save `model.state_dict()`; load it with
# `weights_only=True` and a `map_location` (`"cpu"`, a device, or a mapping
# such as `{"cuda:1": "cuda:0"}`); then `model.load_state_dict(...)` and move the
# model where you want it. Loading onto the CPU first also avoids holding a large
# checkpoint on the GPU twice.

# %% [markdown]
# ## Exercise 3: logging the norm of 1000 products
#
# We multiply 1000 pairs of 100 x 100 matrices and log the Frobenius norm of each
# product, in three ways:
#
# - **(a)** `.item()` after every product, appending a Python float to a list;
# - **(b)** writing each norm into a tensor on the device, and copying that tensor
#   to the host once, at the end;
# - **(c)** one batched product `torch.bmm` of all pairs, then all norms at once.

# %%
a = torch.randn(1000, 100, 100, device=device)
b = torch.randn(1000, 100, 100, device=device)


def log_with_item():  # (a)
    return [torch.linalg.matrix_norm(a[i] @ b[i]).item() for i in range(len(a))]


def log_on_device():  # (b)
    log = torch.empty(len(a), device=device)
    for i in range(len(a)):
        log[i] = torch.linalg.matrix_norm(a[i] @ b[i])
    return log.cpu()


def log_batched():  # (c)
    return torch.linalg.matrix_norm(torch.bmm(a, b)).cpu()


# %% [markdown]
# All three must log the same numbers. (b) repeats (a)'s arithmetic exactly; the
# batched product of (c) may add up in another order, so it agrees to rounding:

# %%
norms_a = torch.tensor(log_with_item())
norms_b, norms_c = log_on_device(), log_batched()
print("norms logged:", len(norms_a), len(norms_b), len(norms_c))
print("(b) equals (a) exactly:", torch.equal(norms_b, norms_a))
print("(c) equals (a) to 1e-4 (relative):", torch.allclose(norms_c, norms_a, rtol=1e-4))

# %% tags=["nbval-ignore-output", "key-result"]
methods = {
    "(a) .item() each step": log_with_item,
    "(b) log on the device": log_on_device,
    "(c) one batched product": log_batched,
}
logging = {  # the check above was the warm-up
    name: d2l_gpu.benchmark(fn, device=device, min_run_time=0.5, warmup=0)
    for name, fn in methods.items()
}
for name, m in logging.items():
    print(f"{name:<24} {m.median * 1e3:8.2f} ms  (q1 to q3: {m.q1 * 1e3:.2f} to {m.q3 * 1e3:.2f})")
base = logging["(a) .item() each step"]
for name, m in list(logging.items())[1:]:
    print(f"{name[:3]} takes {m.median / base.median:.2f}x the time of (a): {verdict(m, base)}")

# %% tags=["nbval-ignore-output"]
fig, ax = plt.subplots(figsize=(6, 3))
ms = list(logging.values())
bars_ms = [[e * 1e3 for e in side] for side in error_bars(ms)]
ax.barh(list(logging), [m.median * 1e3 for m in ms], xerr=bars_ms, capsize=4)
ax.invert_yaxis()
ax.set(xlabel=f"milliseconds for 1000 products on {device} (linear scale)")
ax.set_title("Median; bars: q1 to q3")
plt.show()

# %% [markdown]
# **On a CPU.** A CPU operation is finished when the call returns, so `.item()`
# only reads a number that is already in memory. There is nothing to wait for, and
# (a) is about as fast as anything that loops. (b) gains nothing, and does more:
# `log[i] = ...` is one more PyTorch operation per step (select the slot, copy the
# value into it), with its own call overhead, while `.item()` is a plain read. (c)
# pays the per-call overhead once instead of 3000 times and hands the library one
# large batch to spread over all cores; but it also writes all 1000 products to
# memory before reading them back for the norms, where the loops keep each small
# product in the cache. Which effect wins on a CPU depends on the machine: the
# cell above prints the ratios on yours, and whether each gap exceeds the spread.
#
# **On a GPU.** There a call only *queues* a kernel and returns at once, so the
# Python loop can run ahead of the GPU. In (b) it does: it queues all 3000 kernels
# while the GPU works through them back to back, and the one copy at the end is
# the only wait. In (a), each `.item()` must wait until the product and the norm are
# done and their four bytes have crossed to the host. While it waits, the Python
# thread holds no lock that matters (PyTorch releases Python's global interpreter
# lock, the GIL, during the wait); the cost is that the loop stops queueing work.
# When the result arrives the GPU has nothing left to do, and it idles while Python
# prepares and launches the next product: a thousand times over. So on a GPU (a)
# should be slower than (b), and (c) fastest. By how much no run here measured:
# both loops still pay for launching 3000 small kernels, and that cost may hide
# the waits. The cell above prints the ratios and their verdict on your GPU. Hence
# the rule the section ends with: keep logs on the device and move them in large pieces.

# %% [markdown]
# ## Exercise 4: two products on two GPUs at once
#
# Kernel launches return at once, so one Python thread can keep two GPUs busy:
# launch a product on each, then wait for both. Against doing both products on
# one GPU one after the other, the time should nearly halve. What this cell can
# measure depends on the machine, and it says which case it ran:
#
# - **two or more GPUs:** the experiment itself, with large products;
# - **one CUDA GPU:** two CUDA streams on it, so that two products *may* run side
#   by side. A large product already fills the GPU, so expect little gain; this is
#   overlap on one device, not scaling across two;
# - **no CUDA GPU** (none at all, or one Apple MPS device, which has no streams
#   to choose): no GPU result is possible. As a stand-in, two CPU threads run one
#   product each, with PyTorch limited to one core per product, against one thread
#   running both. This measures cores, not GPUs, and is labelled so.

# %%
gpus = [d for d in d2l_gpu.try_all_gpus() if d.type != "cpu"]
if len(gpus) >= 2:
    setting = f"two GPUs ({gpus[0]}, {gpus[1]})"
    x, y = torch.randn(4096, 4096, device=gpus[0]), torch.randn(4096, 4096, device=gpus[1])
    x2 = y.to(gpus[0])

    def in_sequence():  # both products on the first GPU
        x @ x
        x2 @ x2
        d2l_gpu.synchronize(gpus[0])

    def at_once():  # one product on each GPU: the second launch does not wait for the first
        x @ x
        y @ y
        d2l_gpu.synchronize(gpus[0])
        d2l_gpu.synchronize(gpus[1])

elif gpus and gpus[0].type == "cuda":
    setting = f"one GPU ({gpus[0]}), two CUDA streams"
    x, y = torch.randn(4096, 4096, device=gpus[0]), torch.randn(4096, 4096, device=gpus[0])
    streams = [torch.cuda.Stream(gpus[0]), torch.cuda.Stream(gpus[0])]

    def in_sequence():  # both products on the default stream, one after the other
        x @ x
        y @ y
        d2l_gpu.synchronize(gpus[0])

    def at_once():  # one product per stream: the GPU may overlap them
        # Leaving torch.cuda.stream() makes the device that was current on entry current
        # again (cuda:0 by default); inside torch.cuda.device(...) that is our own GPU.
        with torch.cuda.device(gpus[0]):
            for stream, m in zip(streams, (x, y), strict=True):
                stream.wait_stream(torch.cuda.current_stream())  # x and y are ready
                with torch.cuda.stream(stream):
                    m @ m
        d2l_gpu.synchronize(gpus[0])

else:
    setting = "CPU STAND-IN, NOT A GPU RESULT: two threads, one core per product"
    x, y = torch.randn(384, 384), torch.randn(384, 384)
    pool = ThreadPoolExecutor(2)

    def in_sequence():  # one thread does both
        x @ x
        y @ y

    def at_once():  # two threads, one product each (PyTorch releases the GIL in a product)
        for job in [pool.submit(torch.mm, x, x), pool.submit(torch.mm, y, y)]:
            job.result()

# %% tags=["nbval-ignore-output", "key-result"]
threads = torch.get_num_threads()
torch.set_num_threads(1)  # one core per product; no effect on GPU products
try:
    # Each function waits for its own devices, so the clock needs no device to wait for.
    pair = [d2l_gpu.benchmark(fn, device="cpu", min_run_time=0.15) for fn in (in_sequence, at_once)]
finally:
    torch.set_num_threads(threads)
print(setting)
for name, m in zip(("one after the other", "at the same time"), pair, strict=True):
    print(f"  {name:<20} {m.median * 1e3:8.3f} ms  (q1 to q3: {m.q1 * 1e3:.3f} to {m.q3 * 1e3:.3f})")
speed_up = pair[0].median / pair[1].median
print(f"  speed-up: {speed_up:.2f}x (ideal with two devices: 2); at once is {verdict(*pair[::-1])}")

# %% tags=["nbval-ignore-output"]
fig, ax = plt.subplots(figsize=(7, 2.5))
bars_ms = [[e * 1e3 for e in side] for side in error_bars(pair)]
ax.barh(["one after the other", "at the same time"], [m.median * 1e3 for m in pair],
        xerr=bars_ms, capsize=4)
ax.invert_yaxis()
ax.set_xlabel("milliseconds for two products (linear scale)")
ax.set_title(f"{setting}\nmedian; bars: q1 to q3", fontsize="medium")
plt.show()

# %% [markdown]
# With two GPUs, expect a speed-up near 2: each GPU runs its own product, and the
# only shared work is Python launching two kernels, which takes microseconds. With
# one GPU and two streams, expect little: both streams share the same arithmetic
# units, which one large product already keeps busy. The CPU stand-in usually falls
# short of 2 for reasons of its own: the two cores share memory bandwidth and
# caches, and on a shared machine other programs compete for them.

# %% [markdown]
# ## What this lesson showed
#
# - A GPU wins on large products and loses on tiny ones: every call pays a launch
#   and, to read the result, a wait, whatever its size.
# - Save `state_dict`s, load them with `weights_only=True` and a `map_location`,
#   and a checkpoint from a GPU opens anywhere.
# - `.item()` in a loop costs little on a CPU; on a GPU it stops the loop from
#   queueing work at every step. Keep values on the device and move them once.
# - Two GPUs can run two products at the same time; one GPU's streams or a CPU's
#   threads are different experiments, and are reported as such.
