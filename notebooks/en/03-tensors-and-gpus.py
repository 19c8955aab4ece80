# %% [markdown]
# # Tensors and GPUs: where a tensor lives and how it moves
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/03-tensors-and-gpus.ipynb)
#
# As run on an NVIDIA H200: [outputs](../gpu/nvidia-h200/en/03-tensors-and-gpus.ipynb) (earlier version).
#
# **What you will learn**
#
# - how to see which device a tensor is on, and why every operand of one
#   operation must be on the same device;
# - how to create a tensor directly in a GPU's memory, on the first GPU or on a
#   second one;
# - how to copy a tensor to another device, and when `.to()` copies and when it
#   does not;
# - why PyTorch refuses to copy for us, and which everyday calls (`print`,
#   NumPy) do copy to main memory.
#
# **What you need**
#
# - [02 – Computing devices](02-computing-devices.ipynb); a GPU is optional, and
#   with two GPUs the copy between them really happens.

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
# ## Which device is a tensor on?
#
# A new tensor goes to the CPU unless we say otherwise, and its `device`
# attribute tells us so.

# %%
x = torch.tensor([1, 2, 3])
x.device

# %% [markdown]
# ## One operation, one device
#
# To add two tensors, something has to read both and write the sum somewhere.
# If one sits in main memory and the other in a GPU's memory, PyTorch would have
# to guess where to compute and where to put the result, and either guess means
# a hidden copy. It refuses instead. (One exception, by design: a
# zero-dimensional CPU tensor, a plain number in effect, may join a GPU tensor.)
#
# We can see the refusal on any machine. The `meta` device holds a tensor's shape
# and type but no data at all, so it costs nothing and every PyTorch build has it;
# here it stands in for a second device. The error is caught and printed in one
# line, so the notebook also runs as a plain script:

# %%
on_cpu = torch.ones(2, 3)
on_meta = torch.ones(2, 3, device="meta")
try:
    on_cpu + on_meta
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# The wording differs from what a GPU user meets, because the `meta` device
# checks its inputs in its own way. Adding a CPU tensor to a tensor on the first
# CUDA GPU stops with this message instead:
#
# > RuntimeError: Expected all tensors to be on the same device, but found at
# > least two devices, cuda:0 and cpu!
#
# The next cell makes that mistake for real when there is a GPU. Without one,
# there is no second device to mix, so it prints the message above rather than
# pretending to fail.

# %% tags=["nbval-ignore-output"]
gpu = d2l_gpu.try_gpu()
if gpu.type == "cpu":
    print("No GPU here. On a machine with a CUDA GPU this cell prints:")
    print(
        "RuntimeError: Expected all tensors to be on the same device, "
        "but found at least two devices, cuda:0 and cpu!"
    )
else:
    try:
        torch.ones(2, 3) + torch.ones(2, 3, device=gpu)
    except RuntimeError as error:
        print(f"{type(error).__name__}: {str(error).splitlines()[0]}")

# %% [markdown]
# ## Storage on the GPU
#
# The simplest way to put a tensor on a GPU is to create it there, with the
# `device` argument. Its elements are then written straight into that GPU's
# memory, and only that GPU's memory is used. On a machine without a GPU,
# `try_gpu()` gives the CPU and `X` is an ordinary tensor; on a GPU its printout
# ends with `device='cuda:0'`.

# %%
X = torch.ones(2, 3, device=d2l_gpu.try_gpu())
X

# %% [markdown]
# The memory `X` takes is its number of elements times the bytes of each:

# %%
print("elements:", X.nelement(), "bytes each:", X.element_size(), "bytes in all:", X.nbytes)

# %% [markdown]
# How to read what a GPU's memory holds, and what happens when a tensor does not
# fit, is the subject of [04 – GPU memory](04-gpu-memory.ipynb).
#
# The book now creates a random tensor on a second GPU. `try_gpu(1)` gives the
# second GPU when there is one and the CPU otherwise, and the cell says which
# happened. The values depend on each device's random number generator, so on
# a second GPU they differ from a CPU run's; with fewer GPUs `Y` is drawn on the
# CPU, with the CPU's values. The shape is the same everywhere.

# %% tags=["nbval-ignore-output"]
Y = torch.rand(2, 3, device=d2l_gpu.try_gpu(1))
if d2l_gpu.num_gpus() < 2:
    print(f"No second GPU: Y was created on {Y.device} instead.")
Y

# %%
print("Y:", tuple(Y.shape), Y.dtype)

# %% [markdown]
# ## Copying
#
# Say `X` is on the first GPU and `Y` on the second, and we want `X + Y`. As we
# saw, adding them directly fails. We first copy `X` to where `Y` is, calling the
# copy `Z`, then add there. The picture shows the plan on a machine with two GPUs:

# %%
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

fig, ax = plt.subplots(figsize=(7.5, 2.8))
ax.set(xlim=(0, 11), ylim=(0, 4))
ax.axis("off")
for left, name in [(0.2, "CPU"), (3.8, "GPU 0"), (7.4, "GPU 1")]:
    outline = FancyBboxPatch((left, 0.3), 3.2, 3.2, boxstyle="round,pad=0.05", fc="whitesmoke")
    ax.add_patch(outline)
    ax.text(left + 1.6, 3.15, name, ha="center", weight="bold")
ax.text(
    1.8, 1.8, "main memory;\nPython queues\nthe work", ha="center", va="center", color="dimgray"
)
places = {"X": (5.0, 2.3), "Y": (8.1, 2.5), "Z": (8.1, 1.1), "Y + Z": (9.9, 1.8)}
for label, (x, y) in places.items():
    box = {"boxstyle": "round", "fc": "lightyellow", "ec": "black"}
    ax.text(x, y, label, ha="center", va="center", size=12, bbox=box)
for start, end, color in [
    ("X", "Z", "tab:red"),
    ("Y", "Y + Z", "tab:blue"),
    ("Z", "Y + Z", "tab:blue"),
]:
    arrow = {"arrowstyle": "-|>", "mutation_scale": 14, "shrinkA": 14, "shrinkB": 18}
    line = FancyArrowPatch(places[start], places[end], color=color, **arrow)
    ax.add_patch(line)
ax.text(5.4, 0.7, "copy: Z = X.to('cuda:1')", ha="center", size=9, color="tab:red")
ax.text(9.9, 2.5, "add", ha="center", size=9, color="tab:blue")
plt.show()

# %% [markdown]
# With two GPUs the next cell shows the failure. With one GPU, `Y` fell back to
# the CPU, so the cell fails with the GPU beside the CPU, and the copy below goes
# from the GPU to main memory. Without a GPU, `X` and `Y` are both on the CPU and
# there is nothing to copy between.

# %% tags=["nbval-ignore-output"]
if X.device == Y.device:
    print(f"X and Y are both on {X.device}: X + Y works as it is.")
else:
    try:
        X + Y
    except RuntimeError as error:
        print(f"{type(error).__name__}: {str(error).splitlines()[0]}")

# %% [markdown]
# Now the copy, and both tensors printed:

# %%
Z = X.to(Y.device)
print(X)
print(Z)

# %% [markdown]
# `X` and `Z` hold the same values; with two GPUs they print different devices,
# `cuda:0` and `cuda:1`. With one GPU, `X` is on it and `Y` on the CPU, so `Z` is
# a copy of `X` in main memory, printed without a device. Without a GPU, `X` is
# already where `Y` is, so `X.to(Y.device)` copies nothing and `Z` *is* `X`, the
# same object. The next cell says which case this is.

# %% tags=["nbval-ignore-output"]
print(f"X on {X.device}, Z on {Z.device}; Z is X: {Z is X}")

# %% [markdown]
# Either way, both operands of the sum are now in one place:

# %%
print("Y + Z equals Y + 1:", torch.equal(Y + Z, Y + 1))

# %% [markdown]
# ### When `.to()` copies
#
# `Z` is already where `Y` is. Asking to move it there again costs nothing:
# `.to()` returns the very same tensor object. With `copy=True` it allocates new
# memory and copies every element, even though the device does not change. The
# book's Java API makes the same distinction with a flag; `Z.cuda(1)` in PyTorch
# behaves like the no-copy form. `data_ptr()`, the address of a tensor's first
# element, shows whether two tensors share memory.

# %%
W = Z.to(Z.device, copy=True)
print("Z.to(Z.device) is Z:", Z.to(Z.device) is Z)
print("W is Z:             ", W is Z)
print("same memory:        ", W.data_ptr() == Z.data_ptr())
print("same values:        ", torch.equal(W, Z))

# %% [markdown]
# ## Side notes
#
# People buy GPUs for speed, and moving data between devices is where speed is
# lost. That is why PyTorch never moves an operand to make an operation work: a
# crash points at the problem, while a silent copy would just make the program
# slow without saying why. Three effects are worth knowing, and
# [05 – Asynchrony and transfers](05-asynchrony-and-transfers.ipynb) measures
# each of them:
#
# - a transfer is slow next to the arithmetic it feeds: main memory and a GPU
#   talk over a bus (PCIe) that moves tens of GB/s, while a GPU reads its own
#   memory at hundreds of GB/s to several TB/s;
# - every transfer has a fixed cost, so many small ones are much worse than one
#   large one, and many small operations worse than one that does the same work;
# - some calls make the CPU wait for the GPU, like standing at a coffee counter
#   instead of ordering ahead by phone: meanwhile nothing new gets queued.
#
# ### Printing and NumPy go through main memory
#
# Some calls do copy by themselves, because of what they are for. `print` needs
# the values in main memory, so for a GPU tensor it copies them to the host
# first, without being asked. `.numpy()` does not: a NumPy array can only live
# in main memory, and on a GPU tensor `.numpy()` raises a `TypeError` that asks
# for `.cpu()` first. A `meta` tensor shows the same refusal on any machine:

# %%
try:
    torch.ones(2, device="meta").numpy()
except TypeError as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# Three calls bring values to the host from any device: `.cpu()` gives a CPU
# tensor (which `.numpy()` then accepts), `.tolist()` gives Python numbers, and
# `.item()` gives the one number of a one-element tensor.

# %%
device = d2l_gpu.try_gpu()
t = torch.arange(4.0, device=device)
print(t.cpu().numpy(), t.tolist(), t[-1].item())

# %% [markdown]
# For a tensor already on the CPU, `.cpu()` returns the tensor itself and
# `.numpy()` shares its memory, so nothing is copied. For a GPU tensor, `.cpu()`
# is a real copy into new host memory. The next cell prints which of the two
# happened here.

# %% tags=["nbval-ignore-output"]
on_host = t.cpu()
print(f"t is on {t.device}; t.cpu() is t: {on_host is t}")
print("NumPy array shares t's memory:", on_host.numpy().ctypes.data == t.data_ptr())

# %% [markdown]
# ## What this lesson showed
#
# - A tensor's `device` says where it lives; a new one lives on the CPU unless
#   created elsewhere with `device=`.
# - Every operand of one operation must be on one device; mixing devices is an
#   error, with a message that names both devices.
# - `X.to(Y.device)` copies `X` to where `Y` is, after which they can be added;
#   `.to()` onto the device a tensor is already on returns the tensor itself,
#   and `copy=True` makes a real copy in new memory.
# - PyTorch never moves an operand for us, because moving data is where speed
#   is lost; `print`, `.cpu()`, `.tolist()` and `.item()` copy to main memory,
#   and `.numpy()` needs a CPU tensor.
#
# Next: [04 – GPU memory](04-gpu-memory.ipynb) reads what a GPU's memory holds
# and tries, safely, to ask for more than it has.
