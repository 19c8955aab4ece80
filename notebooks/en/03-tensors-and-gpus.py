# %% [markdown]
# # Tensors and GPUs: where data lives and what moving it costs
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/03-tensors-and-gpus.ipynb)
#
# **What you will learn**
#
# - how to see which device a tensor is on, and why every operand of one
#   operation must be on the same device;
# - how to create tensors directly in a GPU's memory, and how much memory they take;
# - how to copy a tensor to another device, and when `.to()` copies and when it does not;
# - what moving data costs, measured: a copy against the computation it feeds,
#   many small copies against one large one, `.item()` in a loop against one
#   transfer at the end, and pinned memory.
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
# here it stands in for a second device:

# %% tags=["raises-exception"]
on_cpu = torch.ones(2, 3)
on_meta = torch.ones(2, 3, device="meta")
on_cpu + on_meta

# %% [markdown]
# With a GPU, the next cell adds a CPU tensor to a GPU tensor and fails the same
# way, with a message that names both devices. Without one there is no second
# device to mix, and the cell says so instead of pretending.

# %% tags=["raises-exception", "nbval-ignore-output"]
gpu = d2l_gpu.try_gpu()
if gpu.type == "cpu":
    print("No GPU here: there is no CPU-and-GPU pair to add, so nothing fails.")
else:
    torch.ones(2, 3) + torch.ones(2, 3, device=gpu)

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

# %%
print("elements:", X.nelement(), "bytes each:", X.element_size(), "bytes in all:", X.nbytes)

# %% [markdown]
# How much memory the device has given out can be asked directly. CUDA keeps a
# counter per GPU, `torch.cuda.memory_allocated`; its allocator hands out small
# tensors in blocks (512 bytes in current builds), so the 24 bytes of `X` show up
# rounded. Apple's MPS has a counter of its own. For the CPU, PyTorch keeps no such
# counter: tensors there are part of the process's ordinary memory.

# %% tags=["nbval-ignore-output"]
device = X.device
if device.type == "cuda":
    print(f"memory allocated on {device}: {torch.cuda.memory_allocated(device)} bytes")
elif device.type == "mps":
    print(f"memory allocated on mps: {torch.mps.current_allocated_memory()} bytes")
else:
    print("X is in main memory: PyTorch keeps no per-device counter for the CPU.")

# %% [markdown]
# A GPU has far less memory than a server has RAM, so it is worth checking before
# creating something big. A `meta` tensor tells us how many bytes a shape needs
# without allocating any. Asking a GPU for more than it has raises
# `torch.OutOfMemoryError` at once; on the CPU we do not try, because the
# operating system may end the whole kernel rather than report an error.

# %% tags=["nbval-ignore-output"]
memory = {info.device: info.total_memory for info in d2l_gpu.device_info()}
total = memory.get(str(device))
if total is None:
    print(f"PyTorch does not report how much memory {device} has.")
else:
    too_big = torch.empty(2 * total // 4, device="meta")  # float32: 4 bytes per element
    print(f"{device} has {total / 2**30:.1f} GiB; asking for {too_big.nbytes / 2**30:.1f} GiB")
    if device.type == "cpu":
        print("Not tried on the CPU: the operating system could kill the kernel instead.")
    else:
        try:
            torch.empty(too_big.shape, device=device)
        except torch.OutOfMemoryError as error:
            print("torch.OutOfMemoryError:", str(error).splitlines()[0])

# %% [markdown]
# The book now creates a random tensor on a second GPU. `try_gpu(1)` gives the
# second GPU when there is one and the CPU otherwise, and the cell says which
# happened. The values depend on each device's random number generator, so they
# differ between a CPU run and a GPU run; the shape does not.

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
# saw, adding them directly fails. We first copy `X` to where `Y` is, then add
# there. With two GPUs the next cell shows that failure. With one GPU, `Y` fell
# back to the CPU, so the cell fails with the GPU beside the CPU, and the copy
# below goes from the GPU to main memory. Without a GPU, `X` and `Y` are both on
# the CPU and there is nothing to copy between.

# %% tags=["raises-exception", "nbval-ignore-output"]
if X.device == Y.device:
    print(f"X and Y are both on {X.device}: X + Y works as it is.")
else:
    X + Y

# %%
Z = X.to(Y.device)
print(X)
print(Z)

# %% [markdown]
# `X` and `Z` hold the same values; with two GPUs they print different devices,
# `cuda:0` and `cuda:1`. Now both operands of the sum are in one place:

# %%
print("Y + Z equals Y + 1:", torch.equal(Y + Z, Y + 1))

# %% [markdown]
# ### When `.to()` copies
#
# `Z` is already where `Y` is. Asking to move it there again costs nothing:
# `.to()` returns the very same tensor object. With `copy=True` it allocates new
# memory and copies every element, even though the device does not change. The
# book's Java API makes the same distinction with a flag; `Z.cuda(1)` in PyTorch
# behaves like the no-copy form.

# %%
W = Z.to(Z.device, copy=True)
print("Z.to(Z.device) is Z:", Z.to(Z.device) is Z)
print("W is Z:             ", W is Z)
print("same memory:        ", W.data_ptr() == Z.data_ptr())
print("same values:        ", torch.equal(W, Z))

# %% [markdown]
# On a GPU the allocator's counter shows the difference in bytes: the no-copy
# form adds nothing, the copy adds the tensor's full size.

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
    print("No CUDA GPU, so no allocator counter to read; data_ptr() above shows the same.")

# %% [markdown]
# ## Side notes, measured
#
# People buy GPUs for speed, and moving data between devices is where speed is
# lost. That is why PyTorch never copies behind our back: a crash points at the
# problem, while a silent copy would just make the program slow without saying
# why. Three effects matter.
#
# - A transfer is slow next to the arithmetic it feeds. Main memory and a GPU
#   talk over a bus (PCIe) that moves tens of GB/s, while the GPU reads its own
#   memory at one to several TB/s.
# - Every transfer has a fixed cost, whatever its size. Many small ones are much
#   worse than one large one, and so are many small operations compared with one
#   that does the same work at once.
# - Some operations make the CPU wait. A GPU works through a queue of tasks
#   while Python runs ahead, like ordering coffee by phone and picking it up
#   later. Reading a result back (`.item()`, `print`, `.numpy()`) is like
#   standing at the counter until your cup is ready: nothing else gets queued
#   meanwhile, and the GPU may then sit idle.
#
# The cells below measure these with `d2l_gpu.benchmark`, which waits for the
# device before reading the clock and reports the median time with its spread
# (IQR). **What the numbers mean here:** this notebook's stored outputs come from a
# CPU-only machine, where a "transfer" is a copy within main memory. The fixed
# cost per call and the cost of `.item()` still show, but a copy is not slow
# next to computing. On a GPU the same cells compare the bus against the GPU, and
# the copy usually costs more than the computation it feeds. Run the notebook on
# a GPU to see your own numbers. PyTorch runs on one CPU thread while these cells
# measure, so that on a small shared machine a timing does not depend on how soon
# a second core wakes up; a GPU's own work is not affected by that setting.

# %% tags=["nbval-ignore-output"]
device = d2l_gpu.try_gpu()
results = {}


def measure(label, fn):
    """Time fn on the chosen device, print the result and keep it for the plot."""
    results[label] = d2l_gpu.benchmark(
        fn, device=device, min_run_time=0.1, num_threads=1, label=label
    )
    print(results[label])


host = torch.randn(512, 512)
on_device = host.to(device)
landing = torch.empty_like(on_device)  # where each copy lands, allocated once
out = torch.empty_like(on_device)
print(f"copying 1 MiB from the host to {device}, against work done with it on {device}:")
measure("copy 1 MiB to device", lambda: landing.copy_(host))
measure("x * 2 on device", lambda: torch.mul(on_device, 2, out=out))
measure("x @ x on device", lambda: torch.matmul(on_device, on_device, out=out))

# %% [markdown]
# Each copy lands in memory allocated once beforehand, and each computation writes
# into a ready output (`out=`), so the clock sees the transfer and the arithmetic
# rather than the memory allocator. The elementwise `x * 2` reads and writes as
# much memory as the copy moves, while the matrix product does about a thousand
# operations per element. On a GPU, expect the copy to take longer than both.
#
# Next, the same megabyte as 256 pieces of 4 KB, copied one by one, against one
# copy of the whole:

# %% tags=["nbval-ignore-output"]
pieces = [torch.randn(1024) for _ in range(256)]
whole = torch.cat(pieces)
landings = [torch.empty(1024, device=device) for _ in pieces]
whole_landing = torch.empty(whole.shape, device=device)
measure("256 copies of 4 KiB", lambda: [d.copy_(p) for d, p in zip(landings, pieces, strict=True)])
measure("1 copy of 1 MiB", lambda: whole_landing.copy_(whole))
ratio = results["256 copies of 4 KiB"].median / results["1 copy of 1 MiB"].median
print(f"many small copies take {ratio:.1f}x as long as one large copy of the same data")

# %% [markdown]
# Reading values back one at a time is the same mistake in the other direction.
# A training loop that calls `loss.item()` at every step makes the CPU wait for
# the GPU each time. Here are 256 values read with `.item()` one by one, against
# one `.tolist()` that brings them all back at once:

# %% tags=["nbval-ignore-output"]
values = torch.rand(256, device=device)
measure("256 x .item()", lambda: [v.item() for v in values])
measure("1 x .tolist()", lambda: values.tolist())
ratio = results["256 x .item()"].median / results["1 x .tolist()"].median
print(f".item() in a loop takes {ratio:.0f}x as long as one transfer at the end")

# %% [markdown]
# Even on the CPU the loop is much slower: each step creates a tensor and goes
# through PyTorch's dispatcher. On a GPU each `.item()` adds a wait for the GPU
# and a tiny copy over the bus, so the gap grows.
#
# The plot puts all seven medians side by side, on a log scale, with bars for the
# spread between the first and third quartile.

# %% tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt

labels = list(results)
medians = [results[k].median * 1e6 for k in labels]
spread = [
    [(results[k].median - results[k].q1) * 1e6 for k in labels],
    [(results[k].q3 - results[k].median) * 1e6 for k in labels],
]
fig, ax = plt.subplots(figsize=(6, 2.6))
ax.barh(labels, medians, xerr=spread, color="tab:blue", capsize=3)
ax.set_xscale("log")
ax.set_xlabel(f"microseconds per call on {device} (median, IQR)")
ax.invert_yaxis()
fig.tight_layout()
plt.show()

# %% [markdown]
# ### Printing and NumPy go through main memory
#
# `print` and `.numpy()` need the values in main memory, so for a GPU tensor
# they copy it to the host first. `.numpy()` will not do that implicitly: it asks
# for an explicit `.cpu()`. A `meta` tensor shows the same refusal on any machine:

# %% tags=["raises-exception"]
torch.ones(2, device="meta").numpy()

# %% [markdown]
# For a tensor already on the CPU, `.cpu()` returns the tensor itself and
# `.numpy()` shares its memory, so nothing is copied. For a GPU tensor, `.cpu()`
# is a real copy into new host memory. The next cell prints which of the two
# happened here.

# %% tags=["nbval-ignore-output"]
t = torch.arange(4.0, device=device)
on_host = t.cpu()
print(f"t is on {t.device}; t.cpu() is t: {on_host is t}")
print("NumPy array shares t's memory:", on_host.numpy().ctypes.data == t.data_ptr())

# %% [markdown]
# ### A step beyond the book: pinned memory and `non_blocking`
#
# A copy from the host to a CUDA GPU is done by the GPU's copy engine, which can
# only read page-locked ("pinned") memory. From ordinary memory, the data first
# goes through a pinned staging buffer, and the CPU waits for the copy. From
# memory pinned in advance (`tensor.pin_memory()`, or `pin_memory=True` in a
# `DataLoader`), the copy can use the bus directly, and with
# `non_blocking=True` it is only queued, so Python carries on while the data
# moves. A later operation on the GPU waits for it automatically; a clock must be
# synchronized first, which `d2l_gpu.benchmark` does. Pinned memory needs a
# CUDA (or similar) GPU; without one, PyTorch says so.

# %% tags=["nbval-ignore-output"]
batch = torch.randn(2048, 1024)  # 8 MiB
try:
    pinned = batch.pin_memory()
except RuntimeError as error:
    print("pin_memory() is not available here:", error)
else:
    landing = torch.empty(batch.shape, device=device)
    print(f"copying 8 MiB to {device}:")
    measure("from ordinary memory", lambda: landing.copy_(batch))
    measure("from pinned memory", lambda: landing.copy_(pinned, non_blocking=True))

# %% [markdown]
# On a CUDA GPU the pinned copy is typically faster, and its real benefit is
# that the CPU can prepare the next batch while the current one is on its way.
#
# Next: [04 – Neural networks and GPUs](04-neural-networks-and-gpus.ipynb) puts a whole
# model on a device.
