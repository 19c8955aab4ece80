# %% [markdown]
# # GPU memory: the caching allocator, its counters, and running out
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/08-gpu-memory.ipynb)
#
# What a GPU printed for these lessons: [notebooks/gpu](../gpu/README.md).
#
# *Beyond the book: this lesson goes past the chapter.*
#
# **What you will learn**
#
# - how many bytes a tensor needs, worked out before any memory is taken;
# - how PyTorch's caching allocator manages a CUDA GPU's memory, and how to read
#   its counters and the driver's own figure;
# - that `.to(device, copy=True)` takes new memory and plain `.to(device)` none,
#   in bytes;
# - what asking for more memory than a GPU has does, tried safely.
#
# **What you need**
#
# - [03 – Tensors and GPUs](03-tensors-and-gpus.ipynb). A GPU is optional:
#   without one, each cell says what it would show, and touches no GPU API.

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
# ## How big is a tensor before it exists?
#
# A GPU has far less memory than a server has RAM, so it is worth checking before
# creating something big. A tensor needs its number of elements times the bytes
# of its type. A `meta` tensor, which has a shape and a type but no data, works
# that out without allocating anything, on any machine:

# %%
MiB, GiB = 2**20, 2**30
for shape, dtype in [
    ((4096, 4096), torch.float32),
    ((4096, 4096), torch.bfloat16),
    ((64, 3, 224, 224), torch.float32),
    ((2**30,), torch.float32),
]:
    planned = torch.empty(shape, dtype=dtype, device="meta")
    print(f"{str(shape):>18} {str(dtype):>15}: {planned.nbytes / MiB:9.1f} MiB")

# %% [markdown]
# A one-billion-element `float32` tensor takes 4 GiB; a model's weights,
# gradients, optimizer state and activations each add such sums.
#
# ## What the GPU's memory holds
#
# On a CUDA GPU, PyTorch does not ask the driver for memory each time a tensor
# is created; that would be slow. Its *caching allocator* takes memory from the
# driver in large segments and hands out pieces of them. Three numbers describe
# what it holds, and a fourth comes from the driver:
#
# - `torch.cuda.memory_allocated()`: bytes that live tensors occupy, rounded up
#   to the allocator's blocks (512 bytes at least);
# - `torch.cuda.memory_reserved()`: bytes the allocator holds, in use or kept
#   for reuse; freeing a tensor returns its memory here, not to the driver;
# - `torch.cuda.max_memory_allocated()`: the peak of the first number since the
#   start, or since `torch.cuda.reset_peak_memory_stats()`;
# - `torch.cuda.mem_get_info()`: free and total memory as the driver sees it, for
#   every process on the card. Its used part (total minus free) is what
#   `nvidia-smi` counts, and it is more than the reserved bytes: it includes the
#   CUDA context (the GPU code of PyTorch's libraries and its bookkeeping, often
#   several hundred MiB) and other processes.
#
# `torch.cuda.empty_cache()` hands the unused reserved memory back to the driver,
# so other processes can have it; it does not make more memory available to this
# one, and tensors still alive keep theirs. The next cell follows a 64 MiB tensor
# through its life on a CUDA GPU. Apple's MPS has two counters of its own, which
# the cell reads there. The CPU has no such allocator to ask: a tensor there is
# part of the process's ordinary memory, which the operating system counts, so
# on the CPU the cell calls no GPU API at all.
#
# On a CUDA GPU the cell first initializes CUDA itself, with `torch.cuda.init()`.
# PyTorch initializes CUDA lazily, when something first needs it (usually the
# first tensor put on a GPU), and the allocator comes into being only then.
# Before that, the functions that read the counters answer 0, but
# `reset_peak_memory_stats(device)` stops with `RuntimeError: Invalid device
# argument`: there is no allocator for that device yet (an H200 run found this).
# Initializing CUDA on purpose keeps the order right, and lets the first line
# show the card's memory before any tensor exists.

# %% tags=["nbval-ignore-output"]
device = d2l_gpu.try_gpu()
if device.type == "cuda":
    torch.cuda.init()  # before any reset: the allocator, and its counters, exist from here
    torch.cuda.reset_peak_memory_stats(device)

    def show(step):
        free, total = torch.cuda.mem_get_info(device)
        print(
            f"{step:<26} allocated {torch.cuda.memory_allocated(device) / MiB:6.1f} MiB"
            f" | reserved {torch.cuda.memory_reserved(device) / MiB:6.1f} MiB"
            f" | peak {torch.cuda.max_memory_allocated(device) / MiB:6.1f} MiB"
            f" | in use on the card {(total - free) / MiB:7.1f} MiB"
        )

elif device.type == "mps":

    def show(step):
        print(
            f"{step:<26} allocated {torch.mps.current_allocated_memory() / MiB:6.1f} MiB"
            f" | held by the driver {torch.mps.driver_allocated_memory() / MiB:7.1f} MiB"
        )


if device.type in ("cuda", "mps"):
    show("start")
    big = torch.empty(16 * MiB, device=device)  # 16 Mi float32 values: 64 MiB
    show("64 MiB tensor created")
    doubled = big * 2  # a second 64 MiB tensor: the peak rises
    del doubled
    show("a temporary came and went")
    del big
    show("tensor deleted")
    if device.type == "cuda":
        torch.cuda.empty_cache()
        show("after empty_cache()")
else:
    print(f"The helpers chose {device}: tensors live in main memory, counted by the OS.")
    print("No GPU allocator to read here, and no GPU API is called.")

# %% [markdown]
# On a CUDA GPU the lines show `allocated` rise by 64 MiB and fall back when the
# tensor is deleted, `reserved` stay up until `empty_cache()`, `peak` remember
# the moment both tensors existed, and the driver's figure stay well above all
# of them. Already at the start, before any tensor, the card has memory in use:
# the CUDA context. And the driver's figure does not fall back to where it
# started, not even after `empty_cache()`: it grew when the multiplication ran,
# the first GPU kernel of this process. Why is an inference, which this cell
# does not test: CUDA probably loaded that kernel's code onto the card the first
# time it ran ("lazy loading", the default of recent CUDA versions), and may have
# reserved working space for it. Such memory belongs to the context, not to
# PyTorch's allocator, so `empty_cache()` cannot hand it back. To test the
# inference, run the lesson with `CUDA_MODULE_LOADING=EAGER` set before Python
# starts: if it holds, the context is larger at the start and grows less at the
# first kernel.
#
# ## Copies cost memory, in bytes
#
# [03](03-tensors-and-gpus.ipynb) showed that `.to()` onto the device a tensor
# is already on returns the tensor itself, while `copy=True` makes a new one.
# The allocator's counter shows the same in bytes: the no-copy form adds
# nothing, the copy adds the tensor's full size (4 MiB here).

# %% tags=["nbval-ignore-output"]
if device.type == "cuda":
    big = torch.ones(1024, 1024, device=device)  # 4 MiB
    before = torch.cuda.memory_allocated(device)
    same = big.to(device)
    after_same = torch.cuda.memory_allocated(device)
    fresh = big.to(device, copy=True)
    after_copy = torch.cuda.memory_allocated(device)
    print(f".to(device):            +{after_same - before} bytes")
    print(f".to(device, copy=True): +{after_copy - after_same} bytes")
    del big, same, fresh
else:
    print(f"No CUDA allocator counter on {device}; 03 showed the same without one.")

# %% [markdown]
# ## Asking for too much
#
# Asking a CUDA GPU for more than it has raises `torch.OutOfMemoryError` at once,
# and the process carries on: the error can be caught like any other. Apple's
# MPS raises a plain `RuntimeError`: for a request larger than the biggest buffer
# Metal allows, as here, its message starts "Invalid buffer size"; for one that
# merely does not fit next to what is already allocated, "MPS backend out of
# memory". The next cell asks for twice the card's memory, sized with a `meta`
# tensor first, and prints the whole message. On the CPU we do not try, because
# the operating system may end the whole Jupyter kernel rather than report an
# error. No GPU has run this cell yet in this form.

# %% tags=["nbval-ignore-output"]
if device.type == "cuda":
    total = torch.cuda.get_device_properties(device).total_memory
elif device.type == "mps":
    total = torch.mps.recommended_max_memory()
else:
    total = None
if total is None:
    print(f"Not tried on {device}: the operating system could kill the kernel instead.")
else:
    too_big = torch.empty(2 * total // 4, device="meta")  # float32: 4 bytes per element
    print(f"{device} has {total / GiB:.1f} GiB; asking for {too_big.nbytes / GiB:.1f} GiB")
    try:
        torch.empty(too_big.shape, device=device)
    except RuntimeError as error:  # CUDA: torch.OutOfMemoryError, a subclass; MPS: RuntimeError
        print(f"{type(error).__name__}: {error}")

# %% [markdown]
# On a CUDA GPU the message says how much was asked for, how much the card has
# and how much is free, and how much PyTorch holds, then offers advice: when
# memory is reserved but unallocated, setting
# `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` can reduce fragmentation.
# When a real program runs out, the usual remedies are a smaller batch size,
# fewer tensors kept alive (a list of losses that still point at their graphs is
# a classic culprit), or a smaller data type. Calling `empty_cache()` does not
# help a process that is itself short of memory: the cached memory was already
# its own to reuse.

# %% [markdown]
# ## What this lesson showed
#
# - A tensor needs elements times bytes per element; a `meta` tensor computes
#   that without allocating anything.
# - On a CUDA GPU, PyTorch's caching allocator keeps freed memory for reuse:
#   `memory_allocated` counts live tensors, `memory_reserved` what it holds,
#   `max_memory_allocated` the peak, and the driver's figure (`mem_get_info`,
#   `nvidia-smi`) adds the CUDA context and other processes.
# - `.to(device)` onto the same device adds no bytes; `copy=True` adds the
#   tensor's full size.
# - Asking for more than a GPU has fails at once with an error the program can
#   catch (`torch.OutOfMemoryError` on CUDA, a `RuntimeError` on MPS).
#
# Next: [09 – Timing a GPU](09-timing-a-gpu.ipynb) shows how these lessons
# time a device that works behind Python's back.
