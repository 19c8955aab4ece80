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
# - that every tensor carries its device, and that PyTorch, unlike the book's
#   engine, puts new tensors on the CPU unless told otherwise.
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
# The book says GPU performance has grown a thousandfold every decade since
# 2000.
# Its table of computing power shows how: 1 GFLOP/s on an Intel Core CPU
# (2000), 1 TFLOP/s on one NVIDIA C2050 (2010), 1 PFLOP/s on a DGX-2 (2020),
# sixteen V100 GPUs doing 16-bit tensor math (rounded: by the datasheet
# 16 × 125 = 2,000 TFLOP/s). The figure adds NVIDIA's
# datasheet peaks for one GPU, the claim's pace from the K40 (dashed) and a
# product measured here (dotted).

# %% mystnb={"image": {"alt": "Semi-log chart of computing rate in TFLOP/s against year, 2000 to 2024: NVIDIA datasheet peaks for float32, 16-bit and 8-bit tensor math, the book's three table rows, a dashed line rising a thousandfold per decade from the K40, and a dotted level for the product measured here"}} tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt

# the book's table (its introduction): year, TFLOP/s
book = {"Intel Core": (2000, 1e-3), "C2050": (2010, 1), "DGX-2": (2020, 1000)}
# peak TFLOP/s by NVIDIA's datasheets, one GPU, SXM boards where there is a choice
year = {"K40": 2013, "P100": 2016, "V100": 2017, "A100": 2020, "H100": 2022, "B200": 2024}
float32 = {"K40": 4.29, "P100": 10.6, "V100": 15.7, "A100": 19.5, "H100": 67, "B200": 75}
tensor16 = {"V100": 125, "A100": 312, "H100": 989, "B200": 2250}  # FP16/BF16, dense
tensor8 = {"H100": 1979, "B200": 4500}  # FP8, dense

device = d2l_gpu.try_gpu()
side = 512 if device.type == "cpu" else 4096
a = torch.randn(side, side, device=device)
c = torch.empty_like(a)
seconds = d2l_gpu.benchmark(lambda: torch.matmul(a, a, out=c), device=device, min_run_time=0.1)
measured = 2 * side**3 / seconds.median / 1e12
threads = f", {torch.get_num_threads()} threads" if device.type == "cpu" else ""
what = f"{side}x{side} float32 product on {device}{threads}"
print(f"measured here, {what}: {measured:.3g} TFLOP/s")
k40 = float32["K40"]
print(f"datasheet peaks over the K40's float32: H100 float32 {float32['H100'] / k40:.0f}x, "
      f"FP16 {tensor16['H100'] / k40:.0f}x; B200 FP16 {tensor16['B200'] / k40:.0f}x, "
      f"FP8 {tensor8['B200'] / k40:.0f}x")

fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained", dpi=200)
kinds = (float32, "float32"), (tensor16, "FP16/BF16 tensor, dense"), (tensor8, "FP8 tensor, dense")
for peaks, kind in kinds:
    ax.semilogy([year[g] for g in peaks], list(peaks.values()), "o-", label=f"datasheet: {kind}")
for gpu, peak in float32.items():
    ax.annotate(gpu, (year[gpu], peak), xytext=(0, -13), textcoords="offset points", ha="center")
ax.semilogy(*zip(*book.values(), strict=True), "ks", label="the book's table")
for name, point in book.items():
    ax.annotate(name, point, xytext=(5, 5), textcoords="offset points", fontsize="small")
ax.semilogy([2013, 2024], [k40, k40 * 1000**1.1], "k--", label="1000x per decade from the K40")
ax.axhline(measured, color="red", linestyle=":", label=f"measured: {what}")
ax.set_xlabel("year (launch; the book's table: decade)")
ax.set_ylabel("rate (TFLOP/s)")
ax.legend(loc="lower right", fontsize="small")
plt.show()
plt.close(fig)

# %% [markdown]
# By its own table the claim holds, but through three levers, not one faster
# chip: CPU to GPU, then lower precision and more chips in one box. One GPU at
# one precision grew far slower: float32 about 16x from the K40 (2013) to the
# H100 (2022). 16-bit tensor math reaches about 230x the K40's float32 on the
# H100 and 520x on the B200; 8-bit
# numbers on the B200 (2024) pass 1000x after eleven years, still under the
# dashed line. The dotted line is a level, not a launch: a measured product
# stays below a datasheet peak.
# A GPU is also a separate device with its own memory: the data a computation
# needs has to be there first.
#
# This section is about that: naming devices, putting tensors and models
# on them, and moving data between them without wasting the speed, on one GPU,
# then two ([13 – Beyond one machine](13-beyond-one-machine.ipynb) goes further).
#
# ## Look at the hardware
#
# On a machine with an NVIDIA card, the command-line tool `nvidia-smi` comes with
# the driver. It lists every card with its memory, its load and the processes
# using it. The book's authors ran this section on a server with four 16 GB V100
# cards. The next cell runs `nvidia-smi` if the machine has it; otherwise it
# prints the device report of `d2l_gpu`, which asks PyTorch what it can use.

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
# for `torch.from_numpy`. It works through a hook on every call into torch, so
# it adds a little Python work to each, and code that names no device then
# means different things on different machines.
# `set_default_device(None)` removes the hook. Where two tensors land under such
# a default:

# %%
device = d2l_gpu.try_gpu()
default = device if device.type != "cpu" else torch.device("meta")
torch.set_default_device(default)
try:
    made, wrapped = torch.zeros(2), torch.from_numpy(np.zeros(2))
finally:
    torch.set_default_device(None)
print(f"default {default}: torch.zeros went to {made.device}, torch.from_numpy to {wrapped.device}")
print("after set_default_device(None), torch.zeros goes to", torch.zeros(2).device)

# %% [markdown]
# `torch.zeros` went to the default (`cuda:0` with a GPU; without one, the
# cell sets `meta`, a device that stores nothing), `torch.from_numpy` to `cpu`:
# two calls that look alike, two devices. The lessons here
# name the device instead; for a few lines, `with torch.device(d):` does the
# same job without a global setting.
#
# ## Code that meets machines with and without GPUs
#
# The same script often runs on a laptop without a GPU and on a cloud server
# with eight. Code that assumes a GPU crashes on the laptop; code that ignores
# the GPU wastes the server. The helpers in `d2l_gpu` pick what exists.
#
# Running every demonstration as written takes two GPUs, because one copies
# data between them; with fewer, those demonstrations use the CPU in place of
# one of the two GPUs and say so. The next cell says which case this is.

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
# - The book's thousandfold a decade came from CPU to GPU, lower precision and
#   more GPUs in a box; one GPU's float32 grew about 16x in nine years. The
#   speed serves only data already in the GPU's memory.
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
