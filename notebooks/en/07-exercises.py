# %% [markdown]
# # Exercises: four questions about GPUs, answered by measuring
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/08-exercises.ipynb)
#
# As run on an NVIDIA H200: [outputs](../gpu/nvidia-h200/en/08-exercises.ipynb) (earlier version).
#
# **What you will learn**
#
# - how a matrix product's time grows with its size on a CPU and on a GPU,
#   and why a tiny one gains nothing from a GPU;
# - how to save a model's parameters on a GPU and load them anywhere, safely;
# - what `.item()` in a loop really costs, and how to log without paying it;
# - what running two products at once on two devices buys, and what one device
#   can tell us about it.
#
# **What you need**
#
# - the earlier notebooks of this section, above all
#   [03 – Tensors and GPUs](03-tensors-and-gpus.ipynb); a GPU is optional: every
#   cell also runs on a CPU.

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
# Each answer is a few cells of plain PyTorch to change and rerun. `d2l_gpu`
# waits for the device before reading the clock and times repeated blocks of
# calls: a `Measurement` holds the `median` time per call and the blocks'
# quartiles `q1` and `q3` (the plots' bars). `d2l_gpu.compare(first, second)`
# alternates two pieces of code over rounds (ten unless told); its `verdict`
# calls them equal when the rounds' median ratio lies within a tolerance of 1
# (10 % unless told), and different only when the middle half of the ratios
# lies beyond that band.
#
# The stored outputs come from a small shared CPU with two cores and no GPU;
# yours will differ.

# %%
import functools
import math
import os
import pickle
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
from torch import nn

device = d2l_gpu.try_gpu()  # the first GPU, else the CPU


def error_bars(measurements):
    """The distances from each median down to q1 and up to q3, as plt.errorbar wants them."""
    return [[m.median - m.q1 for m in measurements], [m.q3 - m.median for m in measurements]]


# %% [markdown]
# ## Exercise 1: large and small matrix products
#
# We time one n x n float32 product for a range of n on the CPU and, if there is
# one, on the GPU, alternating in `d2l_gpu.compare`. n = 4 is the "task with
# little computation": 128 multiplications and additions. A product takes about
# 2n³ floating-point operations, so the median also gives the rate in GFLOP/s.

# %% tags=["nbval-ignore-output"]
sizes = [4, 16, 64, 256, 512] if device.type == "cpu" else [4, 16, 64, 256, 1024, 2048]
targets = [d2l_gpu.cpu()] if device.type == "cpu" else [d2l_gpu.cpu(), device]
times, verdicts = {}, []
for n in sizes:
    x = [torch.randn(n, n, device=target) for target in targets]
    if len(targets) == 1:
        times[targets[0], n] = d2l_gpu.benchmark(torch.mm, x[0], x[0], min_run_time=0.05)
        continue
    cmp = d2l_gpu.compare(
        functools.partial(torch.mm, x[0], x[0]),
        functools.partial(torch.mm, x[1], x[1]),
        labels=(f"cpu at n = {n}", f"{targets[1]} at n = {n}"),
        device=targets[1],
        min_run_time=0.2,
    )
    times[targets[0], n], times[targets[1], n] = cmp.first, cmp.second
    verdicts.append(cmp.verdict)

print(f"{'device':>8} {'n':>5} {'median':>12} {'middle half (q1 to q3)':>26} {'GFLOP/s':>9}")
for (target, n), m in times.items():
    spread = f"{m.q1 * 1e6:,.1f} to {m.q3 * 1e6:,.1f} us"
    rate = 2 * n**3 / m.median / 1e9
    print(f"{target!s:>8} {n:>5} {m.median * 1e6:>9,.1f} us {spread:>26} {rate:>9.2f}")

# %% tags=["nbval-ignore-output", "key-result"]
if verdicts:
    print(*verdicts, sep="\n")
else:
    print("no GPU: nothing to compare; with one, this cell prints a verdict for each n")

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
# **Reading the curve.** On log-log axes, slope 3 means time growing as n³, like
# the arithmetic. For small n the curve is nearly flat: each call's fixed cost
# (Python, PyTorch's dispatcher, choosing a BLAS routine) dominates. A GPU adds
# its own, launching a kernel and waiting for it, so at 4 x 4 it is no faster
# than the CPU, often slower. For large n its thousands of arithmetic units have
# enough work and it pulls ahead, usually tenfold or more; the
# verdicts above show your machine. (NVIDIA GPUs compute float32 products in full
# float32 unless `torch.set_float32_matmul_precision("high")` allows the faster
# TF32.) Give a GPU large pieces of work.

# %% [markdown]
# ## Exercise 2: reading and writing parameters on a GPU
#
# Save the `state_dict` (the parameter tensors, not the Python object) and load it
# with `weights_only=True`, which rebuilds only tensors and plain containers: a
# safeguard, not a sandbox (before torch 2.6 a known bypass let a crafted file run
# code), so keep torch current and load only files you trust. The file records
# each tensor's device; `map_location` tells `torch.load` where to put them
# instead. Files go to a temporary folder.

# %%
net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
original = {name: t.cpu() for name, t in net.state_dict().items()}  # to compare with

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
clone.load_state_dict(loads["map_location='cpu'"])  # a CPU model from a GPU's file
pairs = zip(net.parameters(), clone.parameters(), strict=True)
print("the CPU copy of the model is exact:", all(torch.equal(p.cpu(), q) for p, q in pairs))

# %% [markdown]
# Without `map_location`, each tensor returns to its saved device, say `cuda:0`,
# and the load fails on a machine without it. With a GPU, the next cell loads onto
# this lesson's device; without one, it asks for `cuda:0` to show that error,
# unless `D2L_DEVICE` is set (asking would touch a GPU the variable leaves out).
# Then saving the whole model shows what `weights_only=True` guards against.

# %% tags=["nbval-ignore-output"]
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "net.pt"
    torch.save(net.state_dict(), path)
    if device.type != "cpu":  # our device, never another GPU
        state = torch.load(path, map_location=device, weights_only=True)
        print(f"loaded onto {device}:", sorted({str(t.device) for t in state.values()}))
    elif os.environ.get("D2L_DEVICE"):
        print("D2L_DEVICE is set: not asking for cuda:0, which this run must leave alone")
    else:  # no GPU: CUDA's check fails before data moves
        try:
            torch.load(path, map_location="cuda:0", weights_only=True)
        except RuntimeError as error:
            print(f"{type(error).__name__}: {str(error).splitlines()[0]}")

# %%
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "whole-model.pt"
    torch.save(net, path)  # pickles the whole object
    try:
        torch.load(path, weights_only=True)
    except pickle.UnpicklingError as error:
        reason = [line.strip() for line in str(error).splitlines() if "Unsupported global" in line]
        print(f"{type(error).__name__}: {reason[0].split(' was ')[0] if reason else error}")

# %% [markdown]
# The safe recipe: save `model.state_dict()`; load it with
# `weights_only=True` and a `map_location` (`"cpu"`, a device, or a mapping
# such as `{"cuda:1": "cuda:0"}`); then `model.load_state_dict(...)` and move the
# model. Loading onto the CPU first also keeps a large checkpoint off the GPU twice.

# %% [markdown]
# ## Exercise 3: logging the norm of 1000 products
#
# We multiply 1000 pairs of 100 x 100 matrices and log each product's Frobenius
# norm, in three ways:
#
# - **(a)** `.item()` after every product, into a Python list;
# - **(b)** writing each norm into a tensor on the device, copied to the host once,
#   at the end;
# - **(c)** one batched product `torch.bmm` of all pairs, then all norms at once.

# %%
a = torch.randn(1000, 100, 100, device=device)
b = torch.randn(1000, 100, 100, device=device)


def log_with_item(a=a, b=b):  # (a)
    return [torch.linalg.matrix_norm(a[i] @ b[i]).item() for i in range(len(a))]


def log_on_device(a=a, b=b):  # (b)
    log = torch.empty(len(a), device=device)
    for i in range(len(a)):
        log[i] = torch.linalg.matrix_norm(a[i] @ b[i])
    return log.cpu()


def log_batched(a=a, b=b):  # (c)
    return torch.linalg.matrix_norm(torch.bmm(a, b)).cpu()


# %% [markdown]
# All three must log the same numbers: (b) repeats (a)'s arithmetic exactly; (c)'s
# batched product may sum in another order, so it agrees to rounding. Then (b)
# and (c) are each timed against (a) on one CPU thread. (b) differs from (a) only
# in when it waits and gets [lesson 07](07-summary.ipynb)'s 25 % band, as
# shared-machine noise can approach the usual 10 %. (c) gets 50 %: on a GPU
# batching should win tenfold or more; on a CPU it gains or loses less, depending
# on the machine.

# %%
norms_a = torch.tensor(log_with_item())
norms_b, norms_c = log_on_device(), log_batched()
print("norms logged:", len(norms_a), len(norms_b), len(norms_c))
print("(b) equals (a) exactly:", torch.equal(norms_b, norms_a))
print("(c) equals (a) to 1e-4 (relative):", torch.allclose(norms_c, norms_a, rtol=1e-4))

# %% tags=["nbval-ignore-output", "key-result"]
against_a = [  # (b), (c) against (a), warmed up above
    d2l_gpu.compare(
        log_with_item,
        fn,
        labels=("(a) .item() each step", label),
        device=device,
        rounds=20,
        warmup=1,
        num_threads=1,
        tolerance=tolerance,
    )
    for fn, label, tolerance in (
        (log_on_device, "(b) log on the device", 0.25),
        (log_batched, "(c) one batched product", 0.5),
    )
]
logging = {m.label: m for m in (against_a[0].first, *(cmp.second for cmp in against_a))}
for name, m in logging.items():
    print(f"{name:<24} {m.median * 1e3:8.2f} ms  (q1 to q3: {m.q1 * 1e3:.2f} to {m.q3 * 1e3:.2f})")
print(*(cmp.verdict for cmp in against_a), sep="\n")

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
# **On a CPU.** An operation is done when its call returns, so `.item()` reads a
# number already in memory: nothing to wait for, and (a) and (b), with one more
# PyTorch operation per step, should agree. (c) pays
# the per-call overhead once instead of 3000 times, but writes all 1000 products
# to memory, where the loops keep each small product in the cache.
#
# **On a GPU.** A call only *queues* a kernel and returns, so in (b) Python runs
# ahead of the GPU, and the final copy is the only wait. In (a) each `.item()`
# waits for the product and its norm, and for four bytes to reach the host. PyTorch releases the global interpreter lock (GIL) meanwhile; the cost
# is that the loop stops queueing, and the GPU idles while Python launches the
# next product. Yet a GPU computes a 100 x 100 product far faster
# than Python queues it, so it idles between steps in (b) too, and (a) and (b)
# may well agree. (c) queues a handful of kernels and should win by far.
#
# ## Exercise 3, continued: where waiting costs
#
# A step costs the host time to queue its kernels and the GPU time to run them.
# In (b) the two overlap, so a step takes about the longer; in (a) they take
# turns, so it takes their sum plus a round trip. The gap is largest, nearly
# twice the time, when the two are equal, and small when either dominates. So on
# a CUDA GPU the next cell measures both, for one step of (b) at growing n: the
# host's by the clock, with large products keeping the GPU busy so the steps only
# queue; the GPU's by two CUDA events (`d2l_gpu.host_and_device_seconds`). Where they
# match best it times (a) against (b) again, on 1000 products taken in turn from
# ten pairs of n x n matrices. A CPU has no queue, so nothing new can show.

# %% tags=["nbval-ignore-output", "key-result"]
if device.type == "cuda":
    mismatch, per_step = {}, {}  # |log(gpu / host)|
    print(f"{'n':>6} {'host per step':>14} {'GPU per step':>13}")
    for k in range(16):  # n: 100 to 3200, doubling the arithmetic
        n = round(100 * 2 ** (k / 3))
        x, y, log = (torch.randn(*shape, device=device) for shape in ((n, n), (n, n), (1,)))

        def step(x=x, y=y, log=log):  # one step of (b)
            log[0] = torch.linalg.matrix_norm(x @ y)

        host, gpu = per_step[n] = d2l_gpu.host_and_device_seconds(step, device)
        print(f"{n:>6} {host * 1e6:>11.1f} us {gpu * 1e6:>10.1f} us")
        mismatch[n] = abs(math.log(gpu / host))
        if gpu > host:  # larger n only drifts apart
            break
    n = min(mismatch, key=mismatch.get)
    pairs = torch.randn(2, 10, n, n, device=device)
    a_n, b_n = ([pairs[j, i % 10] for i in range(1000)] for j in (0, 1))
    host, gpu = per_step[n]
    print(f"n = {n} matches best: per step, host {host * 1e6:.0f} us, GPU {gpu * 1e6:.0f} us")
    print(d2l_gpu.compare(
        functools.partial(log_with_item, a_n, b_n),
        functools.partial(log_on_device, a_n, b_n),
        labels=(f"(a) at n = {n}", f"(b) at n = {n}"),
        device=device,
        tolerance=0.25,
    ))
elif device.type == "cpu":
    print("no queue on the CPU: host and device time per step are one; nothing new to time")
else:  # e.g. Apple MPS: no CUDA events
    print(f"{device}: no CUDA events to time the GPU with; nothing new to time")

# %% [markdown]
# At the matched size the GPU works as long as Python queues, and only (b) lets
# both work at once: (a) should take clearly longer, up to twice the time. Hence
# the rule: keep logs on the device, move them in bulk.

# %% [markdown]
# ## Exercise 4: two products on two GPUs at once
#
# Kernel launches return at once, so one Python thread can keep two GPUs busy: a
# product on each, then a wait for both, should take nearly half the time of both
# in turn on one GPU. The cell says which case it ran:
#
# - **two or more GPUs:** the experiment itself, with large products;
# - **one CUDA GPU:** two CUDA streams, so that two products *may* run side by
#   side: overlap on one device, not scaling across two;
# - **no CUDA GPU** (none, or Apple MPS, which has no streams to choose):
#   nothing is timed. Two CPU threads would measure cores shared with other
#   programs, not devices, with a verdict that changes with the load.

# %%
gpus = [d for d in d2l_gpu.try_all_gpus() if d.type != "cpu"]
if len(gpus) >= 2:
    setting = f"two GPUs ({gpus[0]}, {gpus[1]})"
    x, y = torch.randn(4096, 4096, device=gpus[0]), torch.randn(4096, 4096, device=gpus[1])
    x2 = y.to(gpus[0])

    def in_sequence():  # both on the first GPU
        x @ x
        x2 @ x2
        d2l_gpu.synchronize(gpus[0])

    def at_once():  # one per GPU; launches do not wait
        x @ x
        y @ y
        d2l_gpu.synchronize(gpus[0])
        d2l_gpu.synchronize(gpus[1])

elif gpus and gpus[0].type == "cuda":
    setting = f"one GPU ({gpus[0]}), two CUDA streams"
    x, y = torch.randn(4096, 4096, device=gpus[0]), torch.randn(4096, 4096, device=gpus[0])
    streams = [torch.cuda.Stream(gpus[0]), torch.cuda.Stream(gpus[0])]

    def in_sequence():  # both on the default stream, in turn
        x @ x
        y @ y
        d2l_gpu.synchronize(gpus[0])

    def at_once():  # one product per stream; may overlap
        # on exit, torch.cuda.stream() restores our GPU, not cuda:0
        with torch.cuda.device(gpus[0]):
            for stream, m in zip(streams, (x, y), strict=True):
                stream.wait_stream(torch.cuda.current_stream())  # x and y are ready
                with torch.cuda.stream(stream):
                    m @ m
        d2l_gpu.synchronize(gpus[0])

else:
    setting = None  # no CUDA GPU: nothing to run side by side

# %% tags=["nbval-ignore-output", "key-result"]
if setting is None:
    print(f"no CUDA GPU ({device}): nothing to run at once on two devices, so nothing is timed")
else:
    # each function waits for its devices itself
    cmp = d2l_gpu.compare(
        in_sequence,
        at_once,
        labels=("one after the other", "at the same time"),
        device="cpu",
        rounds=20,
        min_run_time=0.3,
    )
    print(setting)
    print(cmp)
    print(f"speed-up: {1 / cmp.ratio:.2f}x (ideal with two devices: 2)")

# %% tags=["nbval-ignore-output"]
if setting is not None:
    pair = [cmp.first, cmp.second]
    fig, ax = plt.subplots(figsize=(7, 2.5))
    bars_ms = [[e * 1e3 for e in side] for side in error_bars(pair)]
    ax.barh([m.label for m in pair], [m.median * 1e3 for m in pair], xerr=bars_ms, capsize=4)
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds for two products (linear scale)")
    ax.set_title(f"{setting}\nmedian; bars: q1 to q3", fontsize="medium")
    plt.show()

# %% [markdown]
# With two GPUs, expect a speed-up near 2: the only shared work is Python
# launching two kernels. With one GPU and two streams, expect none, and the
# verdict "agree": both streams share the arithmetic units one large product
# already keeps busy.

# %% [markdown]
# ## What this lesson showed
#
# - A GPU wins on large products and loses on tiny ones: every call, whatever its
#   size, pays a launch and a wait to read the result.
# - Save `state_dict`s, load them with `weights_only=True` and a `map_location`,
#   and a checkpoint from a GPU opens anywhere.
# - `.item()` in a loop costs little on a CPU; on a GPU it stops the loop queueing
#   at every step, costing most when a step's host and GPU times are equal. Keep
#   values on the device; move them once.
# - Two GPUs can run two products at once; two streams on one GPU are a
#   different experiment, reported as such.
#
# Next: [09 – Beyond one machine](09-beyond-one-machine.ipynb) runs one process
# per device and adds up their tensors.
