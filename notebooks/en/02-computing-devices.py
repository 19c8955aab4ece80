# %% [markdown]
# # Computing devices: naming the CPU and the GPUs
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/02-computing-devices.ipynb)
#
# As run on an NVIDIA H200: [outputs](../gpu/nvidia-h200/en/02-computing-devices.ipynb) (earlier version).
#
# **What you will learn**
#
# - how PyTorch names the CPU and each GPU, and what one GPU device stands for;
# - how to count the GPUs a machine has, and which of them a process sees;
# - how plain PyTorch picks an accelerator, and two helpers, `try_gpu` and
#   `try_all_gpus`, that let the same code run with or without the GPU it asks for.
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
print("devices the helpers will use:", d2l_gpu.try_all_gpus())
if d2l_gpu.num_gpus() == 0:
    print("No GPU found: every cell still runs on the CPU; the text says what a GPU shows.")

# %% [markdown]
# ## Names for devices
#
# A `torch.device` names a place that holds tensors and runs the arithmetic on
# them. There is one name for the CPU, `cpu`, however many cores it has: they
# all share the computer's main memory. Each GPU gets its own name, because each
# card has its own memory: `cuda:0` is the first card, `cuda:1` the second, and
# plain `cuda` means the current card, which is `cuda:0` unless you change it.
# (AMD cards under ROCm use the same `cuda` names; an Apple Silicon Mac has a
# single GPU called `mps`.)
#
# Making a name allocates nothing and checks nothing, so these work on any machine:

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
# Plain `cuda` has no index, so it is a different name from `cuda:0`, even
# though both mean the first GPU on most machines. A tensor always records the
# concrete device it is on, with its index, so comparing its `device` with
# `torch.device("cuda")` is always false; compare the type instead, or use a
# name that carries an index.

# %%
plain, first = torch.device("cuda"), torch.device("cuda:0")
print("equal:  ", plain == first)
print("indices:", plain.index, first.index)

# %% tags=["nbval-ignore-output"]
if d2l_gpu.accelerator_type() == "cuda":  # a CUDA GPU that the helpers offer
    on_gpu = torch.ones(1, device=d2l_gpu.try_gpu())
    print("a tensor on the helpers' first GPU is on", on_gpu.device)
    print("its device == torch.device('cuda'):", on_gpu.device == torch.device("cuda"))
    print("its device.type == 'cuda':         ", on_gpu.device.type == "cuda")
else:
    print("No CUDA GPU: no tensor can be made with device='cuda' here.")

# %% [markdown]
# On a CUDA machine the cell above shows `cuda:0`, `False` and `True`. (It asks
# `d2l_gpu` whether there is a CUDA GPU to use, so that with `D2L_DEVICE=cpu`,
# met at the end, it leaves the GPU alone.)
#
# The idiom seen in most PyTorch code picks the device in one line, with
# `torch.cuda.is_available()`, which is true when PyTorch was built with CUDA
# (or ROCm) and a driver finds at least one GPU:

# %%
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
print(device)

# %% [markdown]
# It knows CUDA only: on an Apple Silicon Mac it picks the CPU although an `mps`
# GPU is there. `d2l_gpu` keeps the book's short names and looks further:
# `gpu(i)` names the i-th GPU of whichever kind this PyTorch build uses; on a
# machine without one it gives the CUDA name, as the book does.

# %%
for name in [d2l_gpu.cpu(), d2l_gpu.gpu(), d2l_gpu.gpu(1)]:
    print(repr(name))

# %% [markdown]
# Since version 2.6, plain PyTorch has its own accelerator-neutral choice:
# `torch.accelerator.current_accelerator()` names the accelerator this build
# can use (CUDA, MPS, XPU, ...), and `torch.accelerator.is_available()` says
# whether one is there. Its answer has no index and ignores `D2L_DEVICE`;
# `try_gpu`, met below, adds both. Side by side:

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
# `torch.cuda.device_count()` counts CUDA (and ROCm) cards. Recent PyTorch also has
# an accelerator-neutral API, `torch.accelerator`, which counts Apple or Intel GPUs
# too. `d2l_gpu.num_gpus()` answers the same question and also honours the
# `D2L_DEVICE` setting shown at the end. A CPU-only machine prints zeros and
# `None`; one NVIDIA card gives `1`, `1`, `1` and `cuda`, two give `2`, `2`, `2`
# and `cuda`. (With a GPU, the plain-PyTorch line above printed `cuda` and the
# helper `cuda:0`.) Counting asks the driver how many cards there are; it
# reserves nothing on them.

# %% tags=["nbval-ignore-output"]
print("torch.cuda.device_count():       ", torch.cuda.device_count())
print("torch.accelerator.device_count():", torch.accelerator.device_count())
print("d2l_gpu.num_gpus():              ", d2l_gpu.num_gpus())
print("d2l_gpu.accelerator_type():      ", d2l_gpu.accelerator_type())

# %% [markdown]
# ## Which GPUs a process sees
#
# The numbers above are what *this process* may use, not what is plugged in.
# The environment variable `CUDA_VISIBLE_DEVICES` (read by the CUDA runtime,
# `HIP_VISIBLE_DEVICES` for AMD's ROCm) lists the cards a process may see, and
# the ones it lists are numbered again from 0. On a machine with four GPUs,
# `CUDA_VISIBLE_DEVICES=2,3` leaves two: the physical GPU 2 becomes `cuda:0`
# and GPU 3 becomes `cuda:1`. An empty value hides every GPU. The variable is
# read once, when the process first talks to CUDA, so it belongs in the command
# that starts Python or Jupyter (`CUDA_VISIBLE_DEVICES=1 python train.py`), not
# in a cell of a running notebook.
#
# On a machine with CUDA GPUs, the cell below starts a fresh Python process with
# the variable set and lets it count. With one GPU it hides it, and the child
# counts none. With two or more it shows only the last one, and the child finds
# that card as `cuda:0`: the same name this process lists last. The numbers in
# the variable always count physical cards, so if this process was itself
# started with `CUDA_VISIBLE_DEVICES` set, as cluster schedulers often do, the
# cell passes on the last entry of that list. Without a CUDA GPU there is
# nothing to hide, and the cell only says so.

# %% tags=["nbval-ignore-output"]
import os
import subprocess

child = """
import torch
names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
print(len(names), "CUDA GPU(s):", names)
"""
# Ask for names only when the helpers offer a CUDA GPU: D2L_DEVICE=cpu means hands off.
cuda = d2l_gpu.accelerator_type() == "cuda"
names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else []
print("this process sees", len(names), "CUDA GPU(s):", names)
if names:
    # The variable counts physical cards. If this process was itself started with
    # it (cluster schedulers set it), its last card is the last entry listed there.
    given = os.environ.get("HIP_VISIBLE_DEVICES" if torch.version.hip else "CUDA_VISIBLE_DEVICES")
    listed = [entry.strip() for entry in (given or "").split(",") if entry.strip()]
    if len(names) == 1:
        visible = ""
    elif len(listed) >= len(names):
        visible = listed[len(names) - 1]
    else:
        visible = str(len(names) - 1)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": visible, "HIP_VISIBLE_DEVICES": visible}
    run = subprocess.run(
        [sys.executable, "-c", child], env=env, capture_output=True, text=True, check=True
    )
    print(f"a child with CUDA_VISIBLE_DEVICES={visible!r} sees", run.stdout.strip())
else:
    print("No CUDA GPU offered to hide or renumber, so no child process is started here.")

# %% [markdown]
# Inside one process, plain `cuda` means the *current* CUDA device, `cuda:0`
# unless changed. `torch.cuda.set_device(i)` changes it for good, and its own
# docstring discourages it, in favour of the context manager
# `torch.cuda.device(i)` (or of `CUDA_VISIBLE_DEVICES`). The context manager
# changes the current device for the lines inside its block and restores it
# on the way out, even after an error. On a CUDA machine the cell prints
# current device `0`, then the helpers' last GPU for the tensor made inside the
# block (`cuda:1` on two GPUs), then `0` again; elsewhere it says there is no
# current CUDA device.

# %% tags=["nbval-ignore-output"]
if d2l_gpu.accelerator_type() == "cuda":
    last = d2l_gpu.try_all_gpus()[-1]
    print("current CUDA device:", torch.cuda.current_device())
    with torch.cuda.device(last):
        print(f"inside torch.cuda.device({last}), 'cuda' means", torch.ones(1, device="cuda").device)
    print("after the block, the current CUDA device is again", torch.cuda.current_device())
else:
    print("No CUDA GPU offered: there is no current CUDA device to change.")

# %% [markdown]
# ## Asking for a GPU that may not be there
#
# Code that writes `torch.device("cuda:1")` fails later, at the first tensor it
# puts there, on every machine with fewer than two GPUs. Two helpers avoid that:
#
# - `try_gpu(i)` returns the i-th GPU if it exists and the CPU otherwise;
# - `try_all_gpus()` returns every GPU, or `[cpu]` when there is none, so a loop
#   over its result always has at least one device to work with.
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
# A GPU index is a whole number from 0; anything else is refused with a message
# that says what was wrong rather than quietly handing back the CPU:

# %%
try:
    d2l_gpu.try_gpu(-1)
except (TypeError, ValueError) as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# ## Choose once, use everywhere
#
# The usual pattern is to pick the device once, near the top of a script, and
# pass it wherever tensors are made. PyTorch never moves the operands of an
# operation to make it work (it copies to the host only to show or convert
# values, as `print` does), so this one variable decides where everything lives.

# %%
device = d2l_gpu.try_gpu()
x = torch.ones(2, 3, device=device)
print("x is on the chosen device:", x.device == device)
print("x is on", x.device)

# %% [markdown]
# ## Trying the CPU path on a GPU machine
#
# Setting `D2L_DEVICE` restricts what the helpers offer, for a whole run or, as
# here, for a few lines. With `D2L_DEVICE=cpu`, a GPU machine behaves like a
# laptop, which is a quick way to check that code also works without a GPU.

# %%
import os

saved = os.environ.get(d2l_gpu.ENV_VAR)
os.environ[d2l_gpu.ENV_VAR] = "cpu"
try:
    print("with D2L_DEVICE=cpu:", d2l_gpu.try_gpu(), d2l_gpu.try_all_gpus(), d2l_gpu.num_gpus())
finally:
    if saved is None:
        del os.environ[d2l_gpu.ENV_VAR]
    else:
        os.environ[d2l_gpu.ENV_VAR] = saved

# %% [markdown]
# ## What this lesson showed
#
# - `cpu` names the host, `cuda:0`, `cuda:1`, ... each GPU with its memory, and
#   plain `cuda` the current GPU, which `torch.cuda.device(i)` changes for a
#   block of code.
# - The count of GPUs is what this process may see; `CUDA_VISIBLE_DEVICES`,
#   set before CUDA starts, hides cards and numbers the rest from 0.
# - Plain PyTorch picks an accelerator with `torch.accelerator`; `try_gpu` and
#   `try_all_gpus` add an index, fall back to the CPU, and honour `D2L_DEVICE`.
#
# Next: [03 – Tensors and GPUs](03-tensors-and-gpus.ipynb) puts tensors on these devices.
