# %% [markdown]
# # Tensors and GPUs: where a tensor lives and how it moves
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/03-tensors-and-gpus.ipynb)
#
# What a GPU printed for these lessons: [notebooks/gpu](../gpu/README.md).
#
# **What you will learn**
#
# - which device a tensor is on, and why every operand of one operation must be
#   on the same device;
# - how to create a tensor directly in a GPU's memory;
# - how to copy a tensor to another device, and when `.to()` copies;
# - why PyTorch never copies for us, and which everyday calls copy to main memory.
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
print("devices the helpers will use:", ", ".join(map(str, d2l_gpu.try_all_gpus())))
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
# To add two tensors, something reads both and writes the sum somewhere. If one
# sits in main memory and the other in a GPU's memory, PyTorch would have to
# guess where to compute, and either guess means a hidden copy. It refuses.
# (One exception, by design: a zero-dimensional CPU tensor, a plain number in
# effect, may join a GPU tensor.)
#
# We can see the refusal on any machine. The `meta` device holds a tensor's shape
# and type but no data, so it costs nothing and every PyTorch build has it; here
# it stands in for a second device:

# %%
on_cpu = torch.ones(2, 3)
on_meta = torch.ones(2, 3, device="meta")
try:
    on_cpu + on_meta
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# A GPU user meets other wording, because `meta` checks its inputs its own way.
# Adding a CPU tensor to one on the first CUDA GPU stops with this message:
#
# > RuntimeError: Expected all tensors to be on the same device, but found at
# > least two devices, cuda:0 and cpu!
#
# The next cell makes that mistake for real when there is a GPU; without one,
# it prints the message above.

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
# `device` argument: its elements go straight into that GPU's memory. Without a
# GPU, `try_gpu()` gives the CPU; on a GPU the printout ends with
# `device='cuda:0'`.

# %%
X = torch.ones(2, 3, device=d2l_gpu.try_gpu())
X

# %% [markdown]
# The data of `X` takes its number of elements times the bytes of each:

# %%
print(f"{X.nelement()} elements x {X.element_size()} bytes = {X.nbytes} bytes")

# %% [markdown]
# PyTorch's GPU allocator sets aside more: at least 512 bytes. What a GPU's
# memory holds, and what happens when a tensor does not fit, is the subject of
# [08 – GPU memory](08-gpu-memory.ipynb).
#
# ## Copying
#
# Say `X` is on one device and `Y` on another, and we want `X + Y`. The book
# puts `X` on the first GPU and a random `Y` on a second. With one GPU, the copy
# that matters most is the one training makes for every batch, from main memory
# to the GPU, so the next cell then makes `X` in main memory and `Y` on the GPU.
# Without a GPU, both are on the CPU.

# %%
gpus = d2l_gpu.try_all_gpus()
if len(gpus) >= 2:  # the book's case: GPU 0 and GPU 1
    X = torch.ones(2, 3, device=gpus[0])
    Y = torch.rand(2, 3, device=gpus[1])
else:  # X in main memory, as a batch of data starts out
    X = torch.ones(2, 3)
    Y = torch.rand(2, 3, device=gpus[0])
print(f"X is on {X.device}, Y is on {Y.device}")

# %% [markdown]
# Adding them directly fails whenever they are on two devices:

# %% tags=["nbval-ignore-output"]
if X.device == Y.device:
    print(f"X and Y are both on {X.device}: X + Y works as it is.")
else:
    try:
        X + Y
    except RuntimeError as error:
        print(f"{type(error).__name__}: {str(error).splitlines()[0]}")

# %% [markdown]
# So we first copy `X` to where `Y` is, calling the copy `Z`, and add there.
# `X` and `Z` are printed:

# %%
Z = X.to(Y.device)
print(X)
print(Z)

# %% [markdown]
# `X` and `Z` hold the same values. With two GPUs they print `cuda:0` and
# `cuda:1`: the copy went from one card to the other. With one GPU, `X` prints
# without a device and `Z` with `cuda:0`: the copy went from main memory to the
# GPU. No GPU has run this cell yet. Without a GPU, `X` is already where `Y` is,
# so `X.to(Y.device)` copies nothing and `Z` *is* `X`. The next cell says which
# case this is.

# %% tags=["nbval-ignore-output"]
print(f"X on {X.device}, Z on {Z.device}; Z is X: {Z is X}")

# %% [markdown]
# Either way, both operands are now in one place:

# %%
print("Y + Z equals Y + 1:", torch.equal(Y + Z, Y + 1))

# %% [markdown]
# ### When `.to()` copies
#
# `Z` is already where `Y` is, so `Z.to(Z.device)` costs nothing: it returns
# the very same tensor. With `copy=True` it allocates new memory and copies
# every element. (On the book's two GPUs, `Z.cuda(1)` returns `Z` too.)
# `data_ptr()`, the address of a tensor's first element, shows whether two
# tensors share memory.

# %%
W = Z.to(Z.device, copy=True)
print("Z.to(Z.device) is Z:", Z.to(Z.device) is Z)
print("W is Z:             ", W is Z)
print("same memory:        ", W.data_ptr() == Z.data_ptr())
print("same values:        ", torch.equal(W, Z))

# %% [markdown]
# ## Side notes
#
# People buy GPUs for speed, and moving data is where speed is lost. So PyTorch
# never moves an operand for us: a crash points at the problem, while a silent
# copy would slow the program without saying why.
# [04 – Asynchrony and transfers](04-asynchrony-and-transfers.ipynb) measures
# three effects:
#
# - a transfer is slow next to the arithmetic it feeds: the bus to a GPU moves
#   at most 32 or 64 GB/s (PCIe 4.0 or 5.0, by its specification), a
#   data-centre GPU's memory 2 to 8 TB/s (NVIDIA's datasheets, A100 to B200),
#   50 to 125 times more (about 20 times on a Colab T4);
# - every transfer has a fixed cost, so many small ones are much worse than one
#   large one;
# - some calls make the CPU wait for the GPU, like waiting at a coffee counter
#   instead of ordering ahead by phone: meanwhile nothing new gets queued.
#
# ### Printing and NumPy go through main memory
#
# `print` needs the values in main memory, so for a GPU tensor it copies them
# to the host first. `.numpy()` does not: on a GPU tensor it raises a
# `TypeError` that asks for `.cpu()` first, as a `meta` tensor shows anywhere:

# %%
try:
    torch.ones(2, device="meta").numpy()
except TypeError as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# Three calls bring values to the host from any device: `.cpu()` gives a CPU
# tensor, `.tolist()` Python numbers, and `.item()` the one number of a
# one-element tensor.

# %%
device = d2l_gpu.try_gpu()
t = torch.arange(4.0, device=device)
print(t.cpu().numpy(), t.tolist(), t[-1].item())

# %% [markdown]
# For a tensor already on the CPU, `.cpu()` returns the tensor itself and
# `.numpy()` shares its memory. For a GPU tensor, `.cpu()` is a real copy into
# new host memory. The next cell prints which of the two happened here.

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
#   error that names both.
# - `X.to(Y.device)` copies `X` to where `Y` is; onto the device a tensor is
#   already on, `.to()` returns the tensor itself, and `copy=True` really copies.
# - PyTorch never moves an operand for us, because moving data costs speed;
#   `print`, `.cpu()`, `.tolist()` and `.item()` copy to main memory.
#
# Next: [04 – Asynchrony and transfers](04-asynchrony-and-transfers.ipynb)
# measures what waiting for a GPU and moving data to it cost.
