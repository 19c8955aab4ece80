# %% [markdown]
# # Exercises: four questions about GPUs, answered by measuring
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/07-exercises.ipynb)
#
# What a GPU printed for these lessons: [notebooks/gpu](../gpu/README.md).
#
# **What you will learn**
#
# - when a GPU beats the CPU at a matrix product, and when it loses;
# - how to save a model's parameters on a GPU and load them anywhere;
# - what `.item()` after every step costs when the data are already on the GPU;
# - what two GPUs at once should give.
#
# **What you need**
#
# - the earlier lessons, above all
#   [04 – Asynchrony and transfers](04-asynchrony-and-transfers.ipynb). A GPU is
#   optional: every cell runs on a CPU. No GPU has run the GPU branches yet.

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
# Each timing answer ends in one sentence from `d2l_gpu.compare(a, b)`: it runs
# the two in alternating rounds and says which took longer, or that they took
# about as long (within 1.25x; [09 – Timing a GPU](09-timing-a-gpu.ipynb)
# explains the rule). The stored outputs come from a small CPU without a GPU.

# %%
import contextlib
import pickle
import tempfile
from pathlib import Path

from torch import nn

device = d2l_gpu.try_gpu()  # the first GPU, else the CPU


@contextlib.contextmanager
def one_cpu_thread():  # as in 04: steadier CPU timings on a busy machine
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# %% [markdown]
# ## Exercise 1: large and small matrix products
#
# With a GPU, the cell times an n x n product on the CPU against the GPU, for a
# tiny n and a large one. Without one, it asks the second half of the question
# on the CPU alone, with one thread: a 48 x 48 product does 1,728 times the
# arithmetic of a 4 x 4 one.

# %% tags=["nbval-ignore-output"]
def product(n, where):
    x = torch.randn(n, n, device=where)
    return lambda: x @ x


if device.type == "cpu":
    with one_cpu_thread():
        print(d2l_gpu.compare(product(4, device), product(48, device), labels=("4 x 4", "48 x 48")))
else:
    for n in (4, 2048):
        labels = (f"{n} x {n} on the CPU", f"{n} x {n} on {device}")
        print(d2l_gpu.compare(product(n, "cpu"), product(n, device), labels=labels, device=device))

# %% [markdown]
# Far from 1,728 times: a call has a fixed cost (Python, PyTorch's dispatcher,
# choosing a routine) that a tiny product cannot hide. A GPU adds a kernel launch
# to it, so at 4 x 4 it loses to the CPU (`compare` waits once per block of
# calls, so the loss is the launch).
#
# The figure asks it for n from 16 to 1024: each device's rate, 2n³ flops over
# the `benchmark` median. Watch the rate grow with n, and where curves cross.

# %% mystnb={"image": {"alt": "Log-log line chart of matrix-product rate in GFLOP/s against matrix side n from 16 to 1024, one curve per device"}} tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt

sides = [16, 32, 64, 128, 256, 512, 1024]
fig, ax = plt.subplots(figsize=(6, 3.6), dpi=200)
for where in dict.fromkeys([d2l_gpu.cpu(), *d2l_gpu.try_all_gpus()]):  # the CPU, then GPUs
    seconds = [d2l_gpu.benchmark(product(n, where), device=where, min_run_time=0.05) for n in sides]
    rates = [2 * n**3 / s.median / 1e9 for n, s in zip(sides, seconds, strict=True)]
    threads = f" ({torch.get_num_threads()} threads)" if where.type == "cpu" else ""
    print(
        f"{where}{threads}: {rates[0]:.3g} GFLOP/s at n = 16, {rates[-2]:.3g} at 512,"
        f" {rates[-1]:.3g} at 1024"
    )
    ax.loglog(sides, rates, "o-", label=str(where))
ax.set_xticks(sides, [str(n) for n in sides])
ax.set_xlabel("matrix side n")
ax.set_ylabel("rate (GFLOP/s)")
ax.legend()
plt.show()
plt.close(fig)


# %% [markdown]
# Each curve climbs as n spreads the fixed cost over more arithmetic. Where a
# GPU's crosses the CPU's, the GPU begins to win; a CPU alone draws one curve.
# Give a GPU large pieces of work.
#
# ## Exercise 2: reading and writing parameters on a GPU
#
# Save the `state_dict` (the parameter tensors, not the Python object). Each
# tensor in the file records its device; `map_location` tells `torch.load` where
# to put them instead. `weights_only=True` (the default since torch 2.6, written
# anyway) rebuilds only tensors and plain containers: a safeguard, not a
# sandbox, so load only files you trust.

# %%
def make_net():
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 10))


net = make_net().to(device)
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "net.pt"
    torch.save(net.state_dict(), path)
    clone = make_net()  # a CPU model, loaded from the device's file
    clone.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    pairs = zip(net.parameters(), clone.parameters(), strict=True)
    print("the CPU copy is exact:", all(torch.equal(p.cpu(), q) for p, q in pairs))
    if device.type == "cpu":  # a CPU-only machine asked for a GPU's tensors
        try:
            torch.load(path, map_location="cuda:0", weights_only=True)
        except RuntimeError as e:
            print(f"{type(e).__name__}: {str(e).splitlines()[0]}")
    torch.save(net, path)  # the whole object, pickled with its classes
    try:
        torch.load(path, weights_only=True)
    except pickle.UnpicklingError as e:  # the line that names what it refused
        line = next(x for x in str(e).splitlines() if "Unsupported global" in x)
        print(f"{type(e).__name__}: {line.strip().split(' was ')[0]}")


# %% [markdown]
# The first error is what a machine without CUDA prints when asked for a GPU,
# and, more often, when it opens a GPU's checkpoint without `map_location`.
# The last line shows `weights_only=True` refusing to rebuild the class
# `Sequential`.
# The recipe: save `model.state_dict()`; load it with `weights_only=True` and a
# `map_location` (`"cpu"`, a device, or a mapping such as `{"cuda:1": "cuda:0"}`);
# then `model.load_state_dict(...)`. Loading onto the CPU first also keeps a large
# checkpoint from occupying the GPU twice.
#
# ## Exercise 3: logging the norm of 1000 products
#
# We multiply 1000 pairs of n x n matrices, n = 100 as in the book, and log each
# product's Frobenius norm in two ways: **(a)** `.item()` after every product;
# **(b)** each norm written into a tensor on the device, copied to the host once.
# (b) does one more operation per step, the write, and waits once at the end
# instead of at every step.

# %%
def log_with_item(a, b):  # (a)
    return [torch.linalg.matrix_norm(a[i] @ b[i]).item() for i in range(len(a))]


def log_on_device(a, b):  # (b)
    log = torch.empty(len(a), device=device)
    for i in range(len(a)):
        log[i] = torch.linalg.matrix_norm(a[i] @ b[i])
    return log.cpu()


def log_batched(a, b):  # (c)
    return torch.linalg.matrix_norm(a @ b).cpu()


a, b = torch.randn(2, 1000, 100, 100, device=device)
with one_cpu_thread():
    same = torch.equal(torch.tensor(log_with_item(a, b)), log_on_device(a, b))
    print("(a) and (b) log the same numbers:", same)
    print("(c) logs them too, to rounding:", torch.allclose(log_batched(a, b), log_on_device(a, b)))

# %% [markdown]
# [04](04-asynchrony-and-transfers.ipynb) explains what the wait costs: most
# when a step's GPU work must wait for its host work. Here the matrices are
# already on the device. On a CPU nothing waits: (a) and (b) should take about
# as long. On a GPU at the book's n = 100 the host is the bottleneck: a step's
# launches take longer than its arithmetic, the GPU idles in both loops, and
# (a) adds a round trip to every short step, which can be a large share of it.
# The remedy is fewer launches: **(c)** one batched product for all 1000 pairs
# ([12 – Remedies](12-remedies.ipynb)), which on a GPU should beat both loops
# many times over. A CPU launches nothing, so there (c) saves little or loses.

# %% tags=["nbval-ignore-output"]
with one_cpu_thread():
    print(d2l_gpu.compare(
        lambda: log_with_item(a, b),
        lambda: log_on_device(a, b),
        labels=("(a) .item() each step, n = 100", "(b) log on the device"),
        device=device,
    ))
    print(d2l_gpu.compare(
        lambda: log_on_device(a, b),
        lambda: log_batched(a, b),
        labels=("(b) log on the device, n = 100", "(c) one batched product"),
        device=device,
    ))

# %% [markdown]
# On a CUDA GPU the next cell grows n until the GPU takes five times as long as the host per step
# (`d2l_gpu.host_and_device_seconds` times one step of (b)), and compares (a)
# and (b) there, taking the 1000 products from ten pairs.

# %% tags=["nbval-ignore-output"]
if device.type == "cuda":
    for k in range(16):  # n from 100 up, each time doubling the arithmetic
        n = round(100 * 2 ** (k / 3))
        x, y = torch.randn(2, n, n, device=device)
        log = torch.empty(1, device=device)

        def step(x=x, y=y, log=log):  # one step of (b)
            log[0] = torch.linalg.matrix_norm(x @ y)

        host, gpu = d2l_gpu.host_and_device_seconds(step, device)
        if gpu > 5 * host:  # the GPU is now the bottleneck
            break
    print(f"n = {n}: per step, host {host * 1e6:.0f} us, GPU {gpu * 1e6:.0f} us")
    pairs = torch.randn(2, 10, n, n, device=device)
    a, b = ([pairs[j, i % 10] for i in range(1000)] for j in (0, 1))
    print(d2l_gpu.compare(
        lambda: log_with_item(a, b),
        lambda: log_on_device(a, b),
        labels=(f"(a) .item() each step, n = {n}", f"(b) log on the device, n = {n}"),
        device=device,
    ))
else:
    print(f"{device} is not a CUDA GPU: nothing is sized; the cell above is its answer")

# %% [markdown]
# There the GPU is busy either way, and (a) adds per step only a round trip
# and a launch: expect about as long. Keeping logs on the device and moving
# them in bulk is the safe habit in every regime.
#
# ## Exercise 4: two products on two GPUs at once
#
# Kernel launches return at once, so one Python thread can keep two GPUs busy:
# a large product on each, then a wait for both, should take about half the time
# of the two in turn on one GPU. Only two GPUs can show it: two CUDA streams on
# one GPU, or two CPU threads, would measure something else.

# %% tags=["nbval-ignore-output"]
gpus = [d for d in d2l_gpu.try_all_gpus() if d.type != "cpu"]
if len(gpus) >= 2:
    x = torch.randn(4096, 4096, device=gpus[0])
    y = torch.randn(4096, 4096, device=gpus[1])
    y0 = y.to(gpus[0])

    def in_turn():  # both products on the first GPU
        x @ x
        y0 @ y0
        d2l_gpu.synchronize(gpus[0])

    def at_once():  # one product per GPU; each launch returns at once
        x @ x
        y @ y
        d2l_gpu.synchronize(gpus[0])
        d2l_gpu.synchronize(gpus[1])

    print(
        d2l_gpu.compare(in_turn, at_once, labels=(f"both on {gpus[0]}", "one on each of two GPUs"))
    )
else:
    print(
        f"{len(gpus)} GPU(s): nothing timed; with two, one on each should take about half as long."
    )

# %% [markdown]
# The book's hint, near-linear scaling, holds when the only shared work is
# Python launching two kernels, as here. Real training adds the data moving
# between the GPUs, which [13 – Beyond one machine](13-beyond-one-machine.ipynb)
# begins to time.

# %% [markdown]
# ## What this lesson showed
#
# - A GPU wins on large products and loses on tiny ones, whose fixed cost per
#   call it cannot hide.
# - Save `state_dict`s; load them with `weights_only=True` and a `map_location`,
#   and a checkpoint from a GPU opens anywhere.
# - `.item()` every step costs little when the GPU is the bottleneck, as at
#   exercise 3's large n; on short, host-bound steps (the book's n = 100) it adds
#   a round trip to each, and one batched product removes the launches
#   ([12](12-remedies.ipynb)). Keep values on the device; move them once.
# - Two GPUs can run two products at once; one GPU cannot show it.
#
# Next: [08 – GPU memory](08-gpu-memory.ipynb) goes beyond the book: how
# PyTorch manages a GPU's memory, and what running out looks like.
