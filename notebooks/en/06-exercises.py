# %% [markdown]
# # Exercises: four questions about GPUs, answered by measuring
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/06-exercises.ipynb)
#
# **What you will learn**
#
# - how the speed of a matrix product grows with its size, on a CPU and on a GPU,
#   and why a tiny product gains nothing from a GPU;
# - how to save a model's parameters from a GPU and load them anywhere, safely;
# - what `.item()` in a loop really costs, and how to log without paying it;
# - what running two products at once on two devices buys, and what one device
#   or a CPU can and cannot tell us about that.
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
# The book leaves these exercises open. Here each one is a function in
# `d2l_gpu.experiments` that measures and returns plain rows of numbers; this
# notebook runs them, prints the tables and draws them. Every time comes from
# `d2l_gpu.benchmark`: it waits for the device before reading the clock, warms
# up, repeats, and reports the median with the interquartile range (IQR) as its
# spread. The sizes are small on a CPU (`quick=True` keeps this notebook short)
# and larger on a GPU.
#
# Your numbers will differ from the stored ones, and should: they describe your
# machine. The stored outputs were made on a small shared two-core CPU. No GPU
# figures are stored here; for a GPU run without Jupyter, use
# `python -m d2l_gpu bench --json results.json --plot results.png` on that machine.

# %%
import matplotlib.pyplot as plt

from d2l_gpu import bench, experiments, plotting

# %% [markdown]
# ## Exercise 1: large and small matrix products
#
# An n x n product takes about 2n³ floating-point operations, so dividing that by
# the median time gives the rate in GFLOP/s. The sweep times PyTorch in float32
# and bfloat16 on the CPU and, if there is one, on the first GPU; on the CPU it
# also times NumPy on the same sizes. The "of best" column compares each rate
# with the best one the same series reached: a measured peak, not a datasheet's.
# With a GPU, a line under the table gives the size from which the GPU's float32
# products beat the CPU's at that size and every larger one.

# %% tags=["nbval-ignore-output"]
rows = experiments.matmul_sweep(quick=True)
print(bench.format_matmul(rows, experiments.blas_libraries()))

# %% [markdown]
# The products that were timed on the CPU (the same on every machine):

# %%
print(sorted({(r.backend, r.dtype, r.n) for r in rows if r.device == "cpu"}))

# %% tags=["nbval-ignore-output"]
plotting.plot_matmul(rows)
plt.show()

# %% [markdown]
# **What the CPU shows.** The rate climbs with n. A 16 x 16 product is only about
# 8,000 operations; the few microseconds that Python, the dispatcher and the call
# into the BLAS library cost dwarf them, so the rate is tiny. From a few hundred
# upwards the work per call outweighs the fixed cost and the rate levels off near
# what the cores can do. PyTorch and NumPy land close together at large n
# because neither multiplies matrices itself: each hands the product to a tuned
# BLAS (the table names which; on this machine PyTorch uses Intel's MKL and NumPy
# OpenBLAS). bfloat16 is far *slower* than float32 on a CPU without native
# bfloat16 instructions (AVX512-BF16 or AMX): the numbers are converted and the
# work is done in float32 anyway, so fewer sizes are timed.
#
# If some sizes in your table take about 16 ms whatever their n, you are seeing
# threads wake up, not arithmetic. Between two products PyTorch's OpenMP worker
# threads go to sleep, and when the cores are shared with other work (on the
# small shared machine that made the stored outputs, in some runs) waking one
# can cost a whole scheduler tick. In one such run, starting Python with
# `OMP_WAIT_POLICY=active` (the workers spin instead of sleeping) brought a
# 512 x 512 product from 16 ms down to about 3 ms. The harness is not the cause:
# a bare `torch.utils.benchmark.Timer` measures the same stalls.
#
# **What a GPU shows.** The same curve, shifted. Every product on a GPU pays a
# kernel launch and, to read the result, a synchronization: together some
# microseconds, however small the product. For tiny n the GPU is therefore no
# faster than the CPU, often slower. As n grows, thousands of GPU cores get
# enough work to stay busy, and the GPU overtakes the CPU, on common hardware
# somewhere in the low hundreds of n, then pulls away, often by one to two
# orders of magnitude at n = 4096. bfloat16 runs on the tensor cores of recent NVIDIA GPUs and is
# several times faster than float32 there, the reverse of the CPU. PyTorch keeps
# float32 products in full float32 on CUDA unless you allow TF32 with
# `torch.set_float32_matmul_precision("high")`; the JSON that `bench` writes
# records the setting. The lesson for code: give a GPU large pieces of work, not
# many small ones.

# %% [markdown]
# ## Exercise 2: reading and writing parameters on a GPU
#
# Save the `state_dict` (the tensors only, not the Python object) and load it with
# `weights_only=True`, which refuses anything but tensors and plain containers, so
# a file from elsewhere cannot run code. `map_location` says where the loaded
# tensors go. The file is written to a temporary folder that disappears afterwards.

# %%
import tempfile
from pathlib import Path

from torch import nn

device = d2l_gpu.try_gpu()
net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "net.pt"
    torch.save(net.state_dict(), path)
    on_cpu = torch.load(path, map_location="cpu", weights_only=True)
    on_device = torch.load(path, map_location=device, weights_only=True)
clone = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 10))
clone.load_state_dict(on_cpu)
print("loaded onto:", on_cpu["0.weight"].device, "and", on_device["0.weight"].device)
pairs = zip(net.parameters(), clone.parameters(), strict=True)
print("exact:", all(torch.equal(p.cpu(), q) for p, q in pairs))

# %% [markdown]
# `experiments.round_trip` does the same more thoroughly: it records the
# location that the file stores for every tensor, loads it three ways, compares
# every tensor bit for bit, and tries to load without the device the file names.

# %%
rt = experiments.round_trip()
print(bench.format_round_trip(rt))

# %%
print("every load exact:", all(load.exact for load in rt.loads))

# %% [markdown]
# **Why `map_location` matters.** The file remembers where each tensor was:
# `cpu` here, `cuda:0` for parameters saved from a GPU. Without `map_location`,
# `torch.load` puts each tensor back where it was saved, so a file saved on a GPU
# machine and opened on a laptop without CUDA fails with the error above. On this
# CPU-only machine no such file exists; instead we ask `torch.load` for `cuda:0`,
# which runs the very check that such a file triggers and prints the same
# message. On a CUDA machine `round_trip` saves from the GPU and loads the file in
# a child process that sees no GPU, so the message is the real one. The cure is
# the first load above: `map_location="cpu"` (or a device, or a mapping such as
# `{"cuda:0": "cpu"}`). Loading onto the CPU first and moving the model afterwards
# also avoids filling a GPU twice when the checkpoint is large.

# %% [markdown]
# ## Exercise 3: logging the norm of 1000 products
#
# We multiply 1000 pairs of 100 x 100 matrices and log the Frobenius norm of each
# product in three ways: (a) `.item()` after every product, appending a Python
# float; (b) writing each norm into a tensor on the device and copying that
# tensor to the host once at the end; (c) one batched `torch.bmm` into a
# preallocated output, then all norms at once. On CUDA, each method also runs
# once under `torch.cuda.set_sync_debug_mode("warn")`, which warns every time
# the host has to wait for the GPU; the warnings are counted.

# %% tags=["nbval-ignore-output"]
ns = experiments.norms_study(quick=True)
print(bench.format_norms(ns))

# %% [markdown]
# The three methods must log the same numbers (to float tolerance: a batched
# product may add in a different order):

# %%
print("norms logged:", len(ns.norms))
print("all three methods agree within 1e-4:", ns.agree)

# %% tags=["nbval-ignore-output"]
plotting.plot_norms(ns)
plt.show()

# %% [markdown]
# **Why (a) and (b) are close on a CPU.** A CPU operation in PyTorch is finished
# when the call returns. `.item()` then only reads a number that is already in
# main memory: a microsecond, against the tens of microseconds the product takes.
# There is no queue of pending work to wait for, so there is no synchronization to
# count either. (c) is usually much faster for a different reason: one call
# replaces three thousand small ones (product, norm, write), so the fixed cost per
# call is paid once, and the library gets a batch big enough to use every core.
# On a machine busy with other work those cores may not both be free, and (c)
# can then lose its lead: the stall seen in exercise 1, paid inside one big call.
#
# **What changes on a GPU.** There, a call only *queues* a kernel and returns at
# once. In (a), `.item()` must wait until the product and the norm are done and
# copy four bytes back: 1000 synchronizations, each leaving the GPU idle while
# Python prepares the next launch, and the host blocked (holding the interpreter,
# as the chapter warns) while it waits. In (b) the host runs ahead and queues all
# 3000 kernels; the GPU works through them back to back, and the single copy at
# the end is the only wait: one synchronization. (c) needs just a couple of
# launches. Expect (a) to be several times slower than (b) on a GPU, and (c) to be
# faster still. The rule the chapter ends with follows: keep logs on the device
# and move them in large pieces.

# %% [markdown]
# ## Exercise 4: two products on two GPUs at once
#
# What the experiment can measure depends on the machine, and the result says
# which case it was in its `kind`:
#
# - **two or more GPUs:** both products on GPU 0 one after the other, against one
#   product on each of two GPUs at the same time. Launches return at once, so one
#   Python thread keeps both GPUs busy; with a large product each, the time should
#   nearly halve (a speedup close to 2).
# - **one CUDA GPU:** the nearest true experiment is two CUDA streams on the same
#   GPU. A large product already fills the GPU, so expect little gain: streams let
#   kernels overlap when each leaves the GPU partly idle. This shows overlap on one
#   device; it does not show scaling across two.
# - **no GPU:** two CPU threads limited to one core each stand in for two devices,
#   against one such thread doing both. This is a CPU measurement, labelled as a
#   stand-in, and says nothing about GPUs. The ideal is 2; the cores share memory
#   bandwidth and caches, and on a shared machine other work competes for them,
#   which usually keeps it lower, while the spread (see the IQR) can put a single
#   run a little either side.

# %% tags=["nbval-ignore-output"]
cs = experiments.two_products(quick=True)
print(bench.format_two_products(cs))

# %%
print([row.mode for row in cs.rows])

# %% tags=["nbval-ignore-output"]
plotting.plot_concurrency(cs)
plt.show()

# %% [markdown]
# ## Run it all from a terminal
#
# The same measurements, with a progress bar, a table, a JSON file and a figure,
# without Jupyter: useful on a remote GPU machine. Output files go only where you
# point them.
#
# ```bash
# python -m d2l_gpu bench --quick                  # a quick look
# python -m d2l_gpu bench --device cuda:0 --json gpu.json --plot gpu.png
# ```
#
# ## Summary
#
# - A GPU wins on large products and loses on tiny ones: each call pays a launch
#   and a synchronization, whatever its size.
# - Save `state_dict`s, load them with `weights_only=True` and a `map_location`,
#   and a checkpoint from a GPU opens anywhere.
# - `.item()` in a loop costs little on a CPU and a synchronization per step on a
#   GPU; keep values on the device and move them once.
# - Two GPUs can run two products at the same time; one GPU's streams or a CPU's
#   threads are different experiments, and are reported as such.
