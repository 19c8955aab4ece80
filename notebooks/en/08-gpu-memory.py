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
# - the 16 bytes a parameter that training with Adam keeps;
# - what asking for more memory than a device has does, tried safely on a GPU
#   and on the CPU;
# - why a kernel's error can name the wrong line, and `CUDA_LAUNCH_BLOCKING=1`.
#
# **What you need**
#
# - [03 – Tensors and GPUs](03-tensors-and-gpus.ipynb). A GPU is optional:
#   without one, the cells that need it say what it would show, and touch no
#   GPU API.

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
#   every process on the card. Its used part (total minus free) is roughly what
#   `nvidia-smi` shows, and it is more than the reserved bytes: it includes the
#   CUDA context (the GPU code of PyTorch's libraries and its bookkeeping, often
#   several hundred MiB) and other processes.
#
# `torch.cuda.empty_cache()` hands the unused reserved memory back to the driver,
# so other processes can have it. The next cell follows a 64 MiB tensor through
# its life on a CUDA GPU. Apple's MPS has two counters of its own, which the cell
# reads there. The CPU has no such allocator: its tensors are the process's
# ordinary memory, counted by the operating system, so there the cell calls no
# GPU API.
#
# On a CUDA GPU the cell first calls `torch.cuda.init()`. PyTorch initializes
# CUDA lazily, when something first needs it, and the allocator exists only from
# then: before, the counters read 0, but `reset_peak_memory_stats(device)` stops
# with `RuntimeError: Invalid device argument` (an H200 run found this).
# Initializing on purpose keeps the order right, and the first line shows the
# card's memory before any tensor exists.

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
# the first GPU kernel of this process. Why is an inference this cell does not
# test: CUDA probably loaded that kernel's code onto the card when it first ran
# ("lazy loading", the default of recent CUDA versions), and may have reserved
# working space for it. That memory belongs to the context, not to PyTorch's
# allocator, so `empty_cache()` cannot hand it back. To test this, run the
# lesson with `CUDA_MODULE_LOADING=EAGER` set before Python starts: the context
# should then be larger at the start and grow less at the first kernel.
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
# ## A training step, in bytes
#
# Training keeps four numbers for every parameter: its weight, its gradient and
# Adam's two running averages (the *moments*), each a 4-byte `float32`. That is
# 16 bytes a parameter before any activation: a billion parameters need 16 GB.
# The cell counts those tensors' bytes as one step creates them: gradients at
# the first `backward()`, moments at the first `optimizer.step()`. The CPU has
# no allocator counter, so there it counts tensors only. On a CUDA GPU it also
# prints `memory_allocated` and the peak, counted from after a throwaway step in
# which cuBLAS takes its working space from the same allocator. The counter
# should then match the tensors, and the peak exceed them by what lived
# briefly: activations and the step's temporaries. No GPU has run this cell yet.

# %% tags=["nbval-ignore-output", "key-result"]
batch = torch.randn(64, 1024, device=device)


def two_layers():
    return torch.nn.Sequential(
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024)
    ).to(device)


two_layers()(batch).square().mean().backward()  # throwaway: cuBLAS sets up here
if device.type == "cuda":
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
model = two_layers()
optimizer = torch.optim.Adam(model.parameters())
weights = list(model.parameters())
count = sum(w.numel() for w in weights)
print(f"{count:,} parameters x 16 bytes = {count * 16 / MiB:.1f} MiB")


def kept(step):
    grads = [w.grad for w in weights if w.grad is not None]
    moments = [s[k] for s in optimizer.state.values() for k in ("exp_avg", "exp_avg_sq")]
    held = sum(t.nbytes for t in weights + grads + moments)
    line = f"{step:<15} weights, gradients and moments: {held / MiB:5.1f} MiB"
    if device.type == "cuda":
        line += f" | allocated {(torch.cuda.memory_allocated(device) - base) / MiB:5.1f} MiB"
        line += f" | peak {(torch.cuda.max_memory_allocated(device) - base) / MiB:5.1f} MiB"
    print(line)


kept("model created")
model(batch).square().mean().backward()
kept("after backward")
optimizer.step()
kept("after step")

# %% [markdown]
# ## Asking for too much
#
# Asking a CUDA GPU for more than it has raises `torch.OutOfMemoryError` at once,
# and the process carries on: the error can be caught like any other. Apple's
# MPS raises a plain `RuntimeError`: for a request larger than the biggest buffer
# Metal allows, as here, its message starts "Invalid buffer size"; for one that
# merely does not fit next to what is already allocated, "MPS backend out of
# memory". The CPU refuses at once too: by default Linux refuses a request
# larger than its memory and swap together, and PyTorch raises a
# `RuntimeError`. `torch.empty` writes nothing, so a system that grants such a
# request (Linux with overcommit set to always; macOS often does) hands out
# address space only, and writing those pages is what could end the process.
# The next cell asks the device for twice its memory (the machine's, on a CPU),
# sized with a `meta` tensor first, and prints the whole message. No GPU has
# run this cell yet in this form.

# %% tags=["nbval-ignore-output"]
import os

if device.type == "cuda":
    total = torch.cuda.get_device_properties(device).total_memory
elif device.type == "mps":
    total = torch.mps.recommended_max_memory()
elif hasattr(os, "sysconf"):  # Linux, macOS: the machine's memory
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
else:
    total = None
if total is None:
    print(f"Not tried on {device}: Python does not tell this system's memory size.")
else:
    too_big = torch.empty(2 * total // 4, device="meta")  # float32: 4 bytes per element
    print(f"{device} has {total / GiB:.1f} GiB; asking for {too_big.nbytes / GiB:.1f} GiB")
    try:
        granted = torch.empty(too_big.shape, device=device)  # no page of it is written
        print(f"granted: {granted.nbytes / GiB:.1f} GiB of address space, none of it written")
        del granted
    except RuntimeError as error:  # CUDA: torch.OutOfMemoryError, a subclass
        print(f"{type(error).__name__}: {error}")

# %% [markdown]
# On a CUDA GPU the message says how much was asked for, how much the card has
# and how much is free, and how much PyTorch holds, then offers advice: when
# memory is reserved but unallocated, setting
# `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` (`PYTORCH_ALLOC_CONF` in
# recent versions) can reduce fragmentation.
# When a real program runs out, the usual remedies are a smaller batch size,
# fewer tensors kept alive (a list of losses that still point at their graphs is
# a classic culprit), or a smaller data type. Calling `empty_cache()` does not
# help a process that is itself short of memory: the cached memory was already
# its own to reuse.

# %% [markdown]
# ## An error that shows up later
#
# Kernels run behind Python's back ([04](04-asynchrony-and-transfers.ipynb)),
# so an error inside one, such as an index out of range in `torch.index_select`
# or an `nn.Embedding` lookup, is reported at a later call, often an unrelated
# one, and the traceback points there. With `CUDA_LAUNCH_BLOCKING=1` set before
# the process starts, every launch waits for its kernel, and the error is
# reported at the line that caused it; that slows everything, so set it only to
# find an error. A failed check in a kernel (a "device-side assert") leaves the
# process's CUDA context unusable, so the cell runs the bad index in a child
# process, without the variable and with it, and prints the line each run
# blamed. On the CPU nothing runs behind Python's back: `index_select` raises
# an `IndexError` at once, and both runs blame the right line. Apple's MPS has
# no such switch: depending on the torch version, an index out of range there is
# reported at a later wait or not at all. No GPU has run this cell yet.

# %% tags=["nbval-ignore-output"]
import re
import subprocess

CHILD = f"""import torch
x = torch.arange(10.0, device={str(device)!r})
i = torch.tensor([3, 12], device=x.device)
y = torch.index_select(x, 0, i)
print(x.sum().item())
"""
SOURCE = CHILD.splitlines()  # line 4 holds the bad index (12); line 5 is innocent


def blamed(env):
    try:
        child = subprocess.run(
            [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:  # a hung child is ended, and says so in one line
        return "no answer within 120 s: the child was ended"
    places = list(re.finditer(r'File "<string>", line (\d+)', child.stderr))
    if not places:
        return "no error reported"
    message = re.search(r"^[\w.]+: (.*)$", child.stderr[places[-1].end() :], re.M)
    number = int(places[-1].group(1))
    return f"line {number}, {SOURCE[number - 1]}: {message.group(1) if message else 'error'}"


unset = {k: v for k, v in os.environ.items() if k != "CUDA_LAUNCH_BLOCKING"}
print(f"{'unset':>22}: {blamed(unset)}")
print(f"{'CUDA_LAUNCH_BLOCKING=1':>22}: {blamed({**unset, 'CUDA_LAUNCH_BLOCKING': '1'})}")
if device.type != "cuda":
    print(f"That ran on {device}. A CUDA GPU should report (no GPU has run this cell yet):")
    for name, number in (("unset", 5), ("CUDA_LAUNCH_BLOCKING=1", 4)):
        message = "CUDA error: device-side assert triggered"
        print(f"{name:>22}: line {number}, {SOURCE[number - 1]}: {message}")

# %% [markdown]
# Without the variable, PyTorch's CUDA error message itself suggests it: "For
# debugging consider passing CUDA_LAUNCH_BLOCKING=1".

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
# - Training with Adam keeps 16 bytes a parameter (weight, gradient, two
#   moments) before activations.
# - Asking for more than a GPU has fails at once with an error the program can
#   catch (`torch.OutOfMemoryError` on CUDA, a `RuntimeError` on MPS); so does
#   asking the CPU for more than the machine's memory, by Linux's default.
# - A kernel's error surfaces at a later call; `CUDA_LAUNCH_BLOCKING=1` makes
#   it surface at its cause.
#
# Next: [09 – Timing a GPU](09-timing-a-gpu.ipynb) shows how these lessons
# time a device that works behind Python's back.
