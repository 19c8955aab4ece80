# %% [markdown]
# # Computing devices: naming the CPU and the GPUs
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/02-computing-devices.ipynb)
#
# What a GPU printed for these lessons: [notebooks/gpu](../gpu/README.md).
#
# **What you will learn**
#
# - how PyTorch names the CPU and each GPU;
# - how to count the GPUs, which of them a process sees, and how to hide them;
# - how plain PyTorch picks an accelerator, and two helpers, `try_gpu` and
#   `try_all_gpus`, that run with or without the GPU they ask for.
#
# **What you need**
#
# - [01 – Introduction](01-introduction.ipynb); a GPU is optional.

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
# ## Names for devices
#
# A `torch.device` names a place that holds tensors and runs the arithmetic on
# them. The CPU has one name, `cpu`, however many cores it has: they share the
# computer's main memory. Each GPU, with its own memory, gets its own name:
# `cuda:0` is the first card, `cuda:1` the second, and plain `cuda` the current
# card, `cuda:0` unless you change it.
# (AMD cards under ROCm use the same `cuda` names; an Apple Silicon Mac has a
# single GPU called `mps`.)
#
# Making a `torch.device` allocates nothing and checks nothing, so these work anywhere:

# %%
for name in [torch.device("cpu"), torch.device("cuda"), torch.device("cuda", 1)]:
    print(repr(name))

# %% [markdown]
# The book's Java code says "gpu", but that is not a device type PyTorch knows.
# The error lists the types it does know:

# %%
try:
    torch.device("gpu")
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# Plain `cuda` has no index, so it is a different name from `cuda:0`, though
# both usually mean the first GPU. A tensor records its device with the index,
# so comparing its `device` with `torch.device("cuda")` is always false; compare
# the type instead, or use a name with an index.

# %%
plain, first = torch.device("cuda"), torch.device("cuda:0")
print("equal:  ", plain == first)
print("indices:", plain.index, first.index)

# %% tags=["nbval-ignore-output"]
if d2l_gpu.accelerator_type() == "cuda":  # a CUDA GPU that the helpers can use
    on_gpu = torch.ones(1, device=d2l_gpu.try_gpu())
    print("a tensor on the helpers' first GPU is on", on_gpu.device)
    print("its device == torch.device('cuda'):", on_gpu.device == torch.device("cuda"))
    print("its device.type == 'cuda':         ", on_gpu.device.type == "cuda")
else:
    print("No CUDA GPU: no tensor can be made with device='cuda' here.")

# %% [markdown]
# On a CUDA machine the cell above shows `cuda:0`, `False` and `True`.
#
# The idiom seen in most PyTorch code picks the device in one line, with
# `torch.cuda.is_available()`, which is true when PyTorch was built with CUDA
# (or ROCm) and a driver finds at least one GPU:

# %%
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
print(device)

# %% [markdown]
# It knows CUDA only: on an Apple Silicon Mac it picks the CPU although an `mps`
# GPU is there. `d2l_gpu` keeps the book's short names: `gpu(i)` names the i-th
# GPU of whichever kind this PyTorch build uses (the CUDA name when there is none).

# %%
for name in [d2l_gpu.cpu(), d2l_gpu.gpu(), d2l_gpu.gpu(1)]:
    print(repr(name))

# %% [markdown]
# Since version 2.6, plain PyTorch has its own accelerator-neutral choice:
# `torch.accelerator.current_accelerator()` names the accelerator this build
# can use (CUDA, MPS, XPU, ...), `torch.accelerator.is_available()` says
# whether one is there, and `torch.accelerator.device_count()` counts them.
# Its answer has no index; `try_gpu`, met below, adds one. Side by side:

# %%
if torch.accelerator.is_available():
    chosen = torch.accelerator.current_accelerator()
else:
    chosen = torch.device("cpu")
print("plain PyTorch:     ", chosen)
print("d2l_gpu.try_gpu(): ", d2l_gpu.try_gpu())

# %% [markdown]
# ## How many GPUs?
#
# `torch.cuda.device_count()` counts CUDA (and ROCm) cards only;
# `torch.accelerator.device_count()` and `d2l_gpu.num_gpus()` count Apple or
# Intel GPUs too. A CPU-only machine prints zeros and `None`; one NVIDIA card
# gives `1`, `1`, `1` and `cuda`, two give `2`, `2`, `2` and `cuda`. Counting
# asks the driver how many cards there are; it reserves nothing on them.

# %% tags=["nbval-ignore-output"]
print("torch.cuda.device_count():       ", torch.cuda.device_count())
print("torch.accelerator.device_count():", torch.accelerator.device_count())
print("d2l_gpu.num_gpus():              ", d2l_gpu.num_gpus())
print("d2l_gpu.accelerator_type():      ", d2l_gpu.accelerator_type())

# %% [markdown]
# ## Which GPUs a process sees
#
# These are the GPUs *this process* may use, not what is plugged in.
# The environment variable `CUDA_VISIBLE_DEVICES` (`HIP_VISIBLE_DEVICES` for
# AMD's ROCm) lists the cards a process may see, and the ones it lists are
# numbered again from 0. On a machine with four GPUs,
# `CUDA_VISIBLE_DEVICES=2,3` leaves two: the physical GPU 2 becomes `cuda:0`
# and GPU 3 becomes `cuda:1`. Cluster schedulers often set it for each job.
# CUDA reads it once, when it initialises in a process, so it belongs in the
# command that starts Python or Jupyter (`CUDA_VISIBLE_DEVICES=1 python
# train.py`); set in a notebook that has already used the GPU, it changes
# nothing. This process was started with:

# %% tags=["nbval-ignore-output"]
import os

print("CUDA_VISIBLE_DEVICES:", os.environ.get("CUDA_VISIBLE_DEVICES", "not set"))

# %% [markdown]
# An empty value hides every CUDA GPU, which is how to try the laptop's path
# on a GPU machine: start with `CUDA_VISIBLE_DEVICES= jupyter lab`, or run a
# lesson as `CUDA_VISIBLE_DEVICES= python 02-computing-devices.py`; `try_gpu()`
# then gives the CPU, and every cell takes the laptop's path. (An Apple GPU is
# not hidden this way.)
#
# ## The current GPU
#
# Inside one process, plain `cuda` means the *current* CUDA device, `cuda:0`
# unless changed. `torch.cuda.set_device(i)` changes it for the rest of the
# process. That is the right call when a process owns one GPU: in a job started
# by `torchrun`, each process calls it once, for the GPU its local rank picks,
# as `d2l_gpu.distributed` does ([13](13-beyond-one-machine.ipynb)). A process
# that uses several GPUs is better served by `torch.cuda.device(i)`, which
# changes the current device inside its block and restores it on the way out,
# even after an error. On two GPUs the cell prints current device `0`, then
# `cuda:1` for a tensor made inside the block, then `0` again. On one GPU the
# helpers' last GPU is `cuda:0` itself, so nothing visibly changes.

# %% tags=["nbval-ignore-output"]
if d2l_gpu.accelerator_type() == "cuda":
    last = d2l_gpu.try_all_gpus()[-1]
    print("current CUDA device:", torch.cuda.current_device())
    with torch.cuda.device(last):
        print(f"inside torch.cuda.device({last}), 'cuda' means", torch.ones(1, device="cuda").device)
    print("after the block, the current CUDA device is again", torch.cuda.current_device())
else:
    print("No CUDA GPU: there is no current CUDA device to change.")

# %% [markdown]
# ## Asking for a GPU that may not be there
#
# Code that writes `torch.device("cuda:1")` fails later, at the first tensor it
# puts there, on every machine with fewer than two GPUs. Two helpers avoid that:
#
# - `try_gpu(i)` returns the i-th GPU if it exists and the CPU otherwise;
# - `try_all_gpus()` returns every GPU, or `[cpu]` when there is none.
#
# `try_gpu(3)` asks for a fourth GPU, which few machines have:

# %%
print("try_gpu():  ", d2l_gpu.try_gpu())
print("try_gpu(3): ", d2l_gpu.try_gpu(3))

# %% tags=["nbval-ignore-output"]
d2l_gpu.try_all_gpus()

# %% [markdown]
# Without a GPU, both `try_gpu` calls give the CPU and `try_all_gpus()` gives
# `[device(type='cpu')]`. With one GPU the answers are `cuda:0`, `cpu` and
# `[cuda:0]`; with two, `cuda:0`, `cpu` and `[cuda:0, cuda:1]`.
#
# An index that is not a whole number from 0 is refused, not answered with the CPU:

# %%
try:
    d2l_gpu.try_gpu(-1)
except (TypeError, ValueError) as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# ## Choose once, use everywhere
#
# Pick the device once, near the top of a script, and pass it wherever tensors
# are made: since PyTorch never moves an operand, this one variable decides
# where everything lives.

# %%
device = d2l_gpu.try_gpu()
x = torch.ones(2, 3, device=device)
print("x is on the chosen device:", x.device == device)
print("x is on", x.device)

# %% [markdown]
# ## What this lesson showed
#
# - `cpu` names the host, `cuda:0`, `cuda:1`, ... each GPU with its memory, and
#   plain `cuda` the current GPU.
# - The count of GPUs is what this process may see; `CUDA_VISIBLE_DEVICES`,
#   set before CUDA initialises, hides cards and numbers the rest from 0.
# - `torch.cuda.set_device` suits one process per GPU; `torch.cuda.device`
#   changes the current GPU for a block.
# - Plain PyTorch picks an accelerator with `torch.accelerator`; `try_gpu` and
#   `try_all_gpus` add an index and fall back to the CPU.
#
# Next: [03 – Tensors and GPUs](03-tensors-and-gpus.ipynb) puts tensors on these devices.
