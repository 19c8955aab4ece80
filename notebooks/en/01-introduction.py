# %% [markdown]
# # Introduction: why GPUs matter, and what this machine has
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/01-introduction.ipynb)
#
# What a GPU printed for these lessons: [notebooks/gpu](../gpu/README.md).
#
# **What you will learn**
#
# - why deep learning runs on GPUs, and what this section builds towards;
# - how to ask a machine which accelerators it has, with or without `nvidia-smi`;
# - that every PyTorch tensor carries the device it lives on, and that PyTorch,
#   unlike the book's engine, puts new tensors on the CPU unless told otherwise.
#
# **What you need**
#
# - Python with PyTorch and `d2l_gpu` (Colab installs `d2l_gpu` in the next cell);
# - a GPU is optional: every cell runs on a CPU-only laptop and says what a GPU would show.

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
# ## Why the hardware matters
#
# By the book, since about 2000 a single GPU's arithmetic per second has grown
# about a thousandfold every ten years. The figure holds that to NVIDIA's
# datasheets, beside a float32 matrix product timed here: compare the slopes.

# %% tags=["nbval-ignore-output"]
import datetime

import matplotlib.pyplot as plt

# peak TFLOP/s by NVIDIA's datasheets, SXM boards where there is a choice
year = {"K40": 2013, "P100": 2016, "V100": 2017, "A100": 2020, "H100": 2022, "B200": 2024}
float32 = {"K40": 4.29, "P100": 10.6, "V100": 15.7, "A100": 19.5, "H100": 67, "B200": 75}
tensor16 = {"V100": 125, "A100": 312, "H100": 989, "B200": 2250}  # FP16/BF16, dense

device = d2l_gpu.try_gpu()
side = 512 if device.type == "cpu" else 4096
a = torch.randn(side, side, device=device)
c = torch.empty_like(a)
seconds = d2l_gpu.benchmark(lambda: torch.matmul(a, a, out=c), device=device, min_run_time=0.1)
measured = 2 * side**3 / seconds.median / 1e12
print(f"float32 {side}x{side} product on {device}: {measured:.3g} TFLOP/s")
k40, h100 = float32["K40"], float32["H100"]
print(f"datasheet, K40 to H100: float32 {h100 / k40:.0f}x, tensor cores {tensor16['H100'] / k40:.0f}x")

fig, ax = plt.subplots(figsize=(6, 3.6), layout="constrained")
for peaks, label in ((float32, "float32"), (tensor16, "FP16/BF16 tensor cores, dense")):
    ax.semilogy([year[g] for g in peaks], list(peaks.values()), "o-", label=f"datasheet: {label}")
for gpu, peak in float32.items():
    ax.annotate(gpu, (year[gpu], peak), xytext=(0, -13), textcoords="offset points", ha="center")
now = datetime.date.today().year
ax.semilogy([now], [measured], "r*", markersize=12, label=f"this machine (measured, {device})")
ax.set_xlabel("launch year")
ax.set_ylabel("rate (TFLOP/s)")
ax.legend(fontsize="small")
plt.show()
plt.close(fig)

# %% [markdown]
# Held to the datasheets, the claim fails for float32, which grew about 16x from
# the K40 (2013) to the H100 (2022); 16-bit tensor-core math reaches about 230x
# the K40's float32, and a thousandfold takes 8-bit numbers on the B200 (2024).
# A GPU is also a separate device with its own memory: the data a computation
# needs has to be there first.
#
# This section is about exactly that: naming devices, putting tensors and models
# on them, and moving data between them without wasting the speed. It uses one
# GPU, then two; later chapters spread training over many GPUs and servers (a
# first look: [13 – Beyond one machine](13-beyond-one-machine.ipynb)).
#
# ## Look at the hardware
#
# On a machine with an NVIDIA card, the command-line tool `nvidia-smi` comes with
# the driver. It lists every card with its memory, its load and the processes
# using it. The book's authors ran this section on a server with four 16 GB V100
# cards. The next cell runs `nvidia-smi` if the machine has it; otherwise (a
# laptop, an Apple Mac, a CPU-only cloud runner) it prints the device report of
# `d2l_gpu`, which asks PyTorch itself what it can use.

# %% tags=["nbval-ignore-output"]
import shutil
import subprocess

smi = shutil.which("nvidia-smi")
result = subprocess.run([smi], capture_output=True, text=True, check=False) if smi else None
if result is not None and result.returncode == 0:
    print(result.stdout)
else:
    reason = "nvidia-smi failed: " + result.stderr.strip() if result else "nvidia-smi not found"
    print(f"{reason}. What PyTorch sees on this machine:\n")
    print(d2l_gpu.device_report())

# %% [markdown]
# On a CPU-only machine the report names only the CPU. With one NVIDIA GPU,
# `nvidia-smi` shows a card such as "NVIDIA A100" with its memory in MiB; on an
# Apple Silicon Mac the report lists an `mps` device.
#
# The driver is all a PyTorch user has to install: PyTorch's CUDA packages bring
# their own CUDA runtime. The "CUDA Version" in the header of `nvidia-smi` is
# the newest CUDA the *driver* supports; `torch.version.cuda` is the CUDA this
# PyTorch was built with, which the driver runs unless its major version is
# newer. A CPU-only PyTorch prints `None`; a ROCm build fills in
# `torch.version.hip`:

# %% tags=["nbval-ignore-output"]
print("PyTorch built with CUDA:", torch.version.cuda, "| with ROCm (HIP):", torch.version.hip)

# %% [markdown]
# ## Every tensor lives on a device
#
# A PyTorch tensor looks and behaves much like a NumPy array, with one addition:
# it records the device whose memory holds its elements. Unless we ask for
# something else, that is the CPU and the computer's main memory.

# %%
import numpy as np

x = torch.arange(6).reshape(2, 3)
print(x)
print("x lives on:", x.device)
print("a tensor made from a NumPy array lives on:", torch.from_numpy(np.arange(6)).device)

# %% [markdown]
# NumPy arrays always sit in main memory, so NumPy has no device to choose. A
# tensor may instead live in the memory of a GPU, and then the GPU does the
# arithmetic on it.
#
# ## PyTorch puts new tensors on the CPU
#
# The book's engine, DJL, puts new arrays on the GPU by itself whenever it finds
# one. PyTorch does not: a new tensor goes to the CPU unless the code names a
# device, which is why the lessons that follow name one each time.
#
# `torch.set_default_device(d)` changes that for every later factory call that
# names no device (`torch.zeros`, `torch.randn`, new layers' weights), but not
# for `torch.from_numpy`. It works through a hook that sees every call into
# torch, so it adds a little Python work to each of them, and code that names
# no device then means different things on different machines.
# `set_default_device(None)` removes the hook. Where two tensors land under such
# a default:

# %%
device = d2l_gpu.try_gpu()
torch.set_default_device(device)
try:
    made, wrapped = torch.zeros(2), torch.from_numpy(np.zeros(2))
finally:
    torch.set_default_device(None)
print(f"default {device}: torch.zeros went to {made.device}, torch.from_numpy to {wrapped.device}")
print("after set_default_device(None), torch.zeros goes to", torch.zeros(2).device)

# %% [markdown]
# With a GPU, the first line says `cuda:0` for `torch.zeros` and `cpu` for
# `torch.from_numpy`: two lines that look alike, two devices. The lessons here
# name the device instead; for a few lines, `with torch.device(d):` does the
# same job without a global setting.
#
# ## Code that meets machines with and without GPUs
#
# The same script often runs on a laptop without a GPU and on a cloud server
# with eight. Code that assumes a GPU crashes on the laptop; code that ignores
# the GPU wastes the server. The helpers in `d2l_gpu` pick what exists.
#
# Running every demonstration of this section as written takes two GPUs,
# because one of them copies data from one GPU to another. With fewer GPUs, the
# demonstrations that want a second one use the CPU in its place and print that
# they did. The next cell says which case this machine is.

# %% tags=["nbval-ignore-output"]
n = d2l_gpu.num_gpus()
if n >= 2:
    print(f"{n} GPUs: every demonstration runs as written, copies between GPUs included.")
elif n == 1:
    print("1 GPU: demonstrations that want a second GPU use the CPU instead and say so.")
else:
    print("No GPU: everything runs on the CPU, and the text says what a GPU would show.")

# %% [markdown]
# To walk the laptop's path on a GPU machine, start Python with the GPUs hidden
# (`CUDA_VISIBLE_DEVICES=`); [02](02-computing-devices.ipynb) explains how.

# %% [markdown]
# ## What this lesson showed
#
# - GPUs matter because their arithmetic outgrew the CPU's, but only for data
#   that is already in their memory.
# - `nvidia-smi`, or `d2l_gpu.device_report()` without it, says what a machine
#   has; the driver's CUDA version and PyTorch's are different numbers.
# - Every tensor records its device. PyTorch puts new tensors on the CPU; a
#   default device can change that, at a small cost on every call and with
#   less visible code.
# - The helpers in `d2l_gpu` pick devices that exist, so the same code runs
#   with or without a GPU.
#
# Next: [02 – Computing devices](02-computing-devices.ipynb) names the CPU and
# the GPUs, and picks ones that exist.
