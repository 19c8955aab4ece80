# %% [markdown]
# # Tensors and GPUs: where data lives and what moving it costs
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/03-tensors-and-gpus.ipynb)
#
# **What you will learn**
#
# - how to see which device a tensor is on, and why every operand of one
#   operation must be on the same device;
# - how to create tensors directly in a GPU's memory, and how to read what the
#   GPU's memory allocator holds;
# - how to copy a tensor to another device, and when `.to()` copies and when it does not;
# - that a GPU runs behind Python's back, and how to time it and read its
#   results safely;
# - what moving data costs, measured: a copy against the computation it feeds,
#   many small copies against one large one, `.item()` in a loop against one
#   transfer at the end, and pinned memory in a data loader.
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

# %%
print("elements:", X.nelement(), "bytes each:", X.element_size(), "bytes in all:", X.nbytes)

# %% [markdown]
# ### What the GPU's memory holds
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
# through its life on a CUDA GPU. The CPU has no such allocator to ask: a tensor
# there is part of the process's ordinary memory, which the operating system
# counts. The CUDA counters then read 0 (they report only memory on CUDA GPUs).

# %% tags=["nbval-ignore-output"]
MiB = 2**20
cuda = d2l_gpu.try_gpu()
if cuda.type == "cuda":
    torch.cuda.reset_peak_memory_stats(cuda)

    def show(step):
        free, total = torch.cuda.mem_get_info(cuda)
        print(
            f"{step:<26} allocated {torch.cuda.memory_allocated(cuda) / MiB:6.1f} MiB"
            f" | reserved {torch.cuda.memory_reserved(cuda) / MiB:6.1f} MiB"
            f" | peak {torch.cuda.max_memory_allocated(cuda) / MiB:6.1f} MiB"
            f" | in use on the card {(total - free) / MiB:7.1f} MiB"
        )

    show("start")
    big = torch.empty(16 * MiB, device=cuda)  # 16 Mi float32 values: 64 MiB
    show("64 MiB tensor created")
    doubled = big * 2  # a second 64 MiB tensor: the peak rises
    del doubled
    show("a temporary came and went")
    del big
    show("tensor deleted")
    torch.cuda.empty_cache()
    show("after empty_cache()")
else:
    print("No CUDA GPU: tensors live in main memory, counted by the operating system.")
    print("The CUDA counters read:", torch.cuda.memory_allocated(), torch.cuda.memory_reserved())

# %% [markdown]
# On a CUDA GPU the lines show `allocated` rise by 64 MiB and fall back when the
# tensor is deleted, `reserved` stay up until `empty_cache()`, `peak` remember
# the moment both tensors existed, and the driver's figure stay well above all
# of them. (Apple's MPS has counters of its own:
# `torch.mps.current_allocated_memory()` and `torch.mps.driver_allocated_memory()`.)
#
# A GPU has far less memory than a server has RAM, so it is worth checking before
# creating something big. A `meta` tensor tells us how many bytes a shape needs
# without allocating any. Asking a CUDA GPU for more than it has raises
# `torch.OutOfMemoryError` at once. Apple's MPS raises a plain `RuntimeError`:
# for a request larger than the biggest buffer Metal allows, as here, its message
# starts "Invalid buffer size"; for one that merely does not fit next to what is
# already allocated, "MPS backend out of memory". On the CPU we do not try,
# because the operating system may end the whole Jupyter kernel rather than
# report an error.

# %% tags=["nbval-ignore-output"]
device = X.device
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
    print(f"{device} has {total / 2**30:.1f} GiB; asking for {too_big.nbytes / 2**30:.1f} GiB")
    try:
        torch.empty(too_big.shape, device=device)
    except torch.OutOfMemoryError as error:  # CUDA (and ROCm)
        print(f"{type(error).__name__}: {str(error).splitlines()[0]}")
    except RuntimeError as error:  # MPS reports running out as a plain RuntimeError
        print(f"{type(error).__name__}: {str(error).splitlines()[0]}")

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

# %%
Z = X.to(Y.device)
print(X)
print(Z)

# %% [markdown]
# `X` and `Z` hold the same values; with two GPUs they print different devices,
# `cuda:0` and `cuda:1`. On a machine with one device, `X` is already where `Y`
# is, so `X.to(Y.device)` copies nothing and `Z` *is* `X`, the same object. The
# next cell says which case this is.

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
# ## A GPU works behind Python's back
#
# When Python calls `torch.matmul` on a GPU tensor, PyTorch checks the arguments,
# puts a *kernel* (a program for the GPU) into the GPU's queue, and returns at
# once, long before the GPU has finished. Python runs ahead while the GPU works
# through the queue, like ordering coffee by phone and picking it up later. The
# result tensor exists straight away; its values arrive when the GPU gets there.
#
# That makes a naive clock wrong: it measures how long it took to *queue* the
# work. The cell below queues ten matrix products and reads the clock twice:
# once right after the loop, and once after `d2l_gpu.synchronize(device)` (on
# CUDA, `torch.cuda.synchronize()`), which waits until the queue is empty. On
# the CPU the arithmetic happens inside each call, so both readings agree; on a
# GPU the first one is far smaller than the second.

# %% tags=["nbval-ignore-output"]
import time

device = d2l_gpu.try_gpu()
n = 256 if device.type == "cpu" else 4096  # big enough to keep a GPU busy for a while
a = torch.randn(n, n, device=device)
torch.matmul(a, a)  # warm-up: the first call loads the GPU's code
d2l_gpu.synchronize(device)

start = time.perf_counter()
for _ in range(10):
    c = torch.matmul(a, a)
queued = time.perf_counter() - start  # Python is done: the work is queued
d2l_gpu.synchronize(device)
finished = time.perf_counter() - start  # the device is done too
print(f"10 products of {n}x{n} matrices on {device}:")
print(f"  clock read when the loop returned: {queued * 1e3:8.2f} ms")
print(f"  clock read after synchronizing:    {finished * 1e3:8.2f} ms")
print(f"  the second reading is {finished / queued:.1f}x the first")

# %% [markdown]
# A CUDA GPU can also time itself. A `torch.cuda.Event` is a marker put into the
# queue; once the GPU has passed two of them, `elapsed_time` gives the time
# between them in milliseconds, measured on the GPU's clock, so Python's own
# overhead is left out.

# %% tags=["nbval-ignore-output"]
if device.type == "cuda":
    begin = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    # Plain record() marks the current GPU's queue; name the queue the products
    # go to, which differs when D2L_DEVICE picks a GPU other than cuda:0.
    queue = torch.cuda.current_stream(device)
    begin.record(queue)
    for _ in range(10):
        c = torch.matmul(a, a)
    end.record(queue)
    end.synchronize()  # wait until the GPU has passed the second marker
    print(f"CUDA events: 10 products took {begin.elapsed_time(end):.2f} ms on the GPU")
else:
    print(f"CUDA events need a CUDA GPU; on {device} the synchronized clock above is the answer.")

# %% [markdown]
# The same queue explains a puzzling kind of error. When a kernel fails, say an
# index out of range inside the GPU, Python has usually moved on, and the error
# surfaces at a later line that waits for the GPU (a `print`, an `.item()`),
# far from its cause. Setting the environment variable `CUDA_LAUNCH_BLOCKING=1`
# before Python starts makes every launch wait for its kernel, so the error
# points at the line that caused it. It slows everything down: use it to find a
# bug, not to train.
#
# ## Side notes, measured
#
# People buy GPUs for speed, and moving data between devices is where speed is
# lost. That is why PyTorch never copies behind our back: a crash points at the
# problem, while a silent copy would just make the program slow without saying
# why. Three effects matter.
#
# - A transfer is slow next to the arithmetic it feeds. Main memory and a GPU
#   talk over a bus (PCIe) that moves tens of GB/s, while a GPU reads its own
#   memory at hundreds of GB/s to several TB/s, depending on the card.
# - Every transfer has a fixed cost, whatever its size. Many small ones are much
#   worse than one large one, and so are many small operations compared with one
#   that does the same work at once.
# - Some operations make the CPU wait. Reading a result back (`.item()`,
#   `print`, `.tolist()`, `.cpu()`) is like standing at the counter until your
#   coffee is ready: nothing else gets queued meanwhile, and the GPU may then
#   sit idle.
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
# through PyTorch's dispatcher, the layer that picks the right implementation
# for each call. On a GPU each `.item()` adds a wait for the GPU and a tiny copy
# over the bus, so the gap grows.
#
# The plot puts all seven medians side by side, on a log scale, with bars for the
# spread between the first and third quartile.

# %% tags=["nbval-ignore-output"]
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
# `print` needs the values in main memory, so for a GPU tensor it copies them to
# the host first, without being asked. `.numpy()` does not: a NumPy array can
# only live in main memory, and on a GPU tensor `.numpy()` raises a `TypeError`
# that asks for `.cpu()` first. A `meta` tensor shows the same refusal on any
# machine:

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
    print(f"pin_memory() is not available here: {type(error).__name__}: {error}")
else:
    landing = torch.empty(batch.shape, device=device)
    print(f"copying 8 MiB to {device}:")
    measure("from ordinary memory", lambda: landing.copy_(batch))
    measure("from pinned memory", lambda: landing.copy_(pinned, non_blocking=True))

# %% [markdown]
# On a CUDA GPU the pinned copy is typically faster, and its real benefit is
# that the CPU can prepare the next batch while the current one is on its way.
#
# The other direction hides a trap. A copy from the GPU into pinned host memory
# with `non_blocking=True` is also only queued, but now the *CPU* reads the
# result, and nothing makes the CPU wait for it. Reading the host tensor before
# synchronizing may see memory the copy has not filled yet. (The same holds for
# `.to("cpu", non_blocking=True)`, which allocates the pinned result for you.)
# Below, a matrix product of ones, where every element equals `n`, is queued and
# then copied back without blocking; the first element is read once too early and
# once after synchronizing. On the CPU both reads are right, because nothing is
# queued; on a CUDA GPU the early read typically shows `0.0` or a stale value.

# %% tags=["nbval-ignore-output"]
ones = torch.ones(n, n, device=device)
product = ones @ ones  # every element equals n; on a GPU this is only queued
result = torch.empty(product.shape, pin_memory=device.type == "cuda")
result.copy_(product, non_blocking=True)  # on a GPU: queued behind the product
too_early = result[0, 0].item()  # result is a CPU tensor: this does not wait
d2l_gpu.synchronize(device)
print(f"read before synchronizing: {too_early} (expected {float(n)})")
print(f"read after synchronizing:  {result[0, 0].item()}")

# %% [markdown]
# A `DataLoader` with `pin_memory=True` hands out batches already in pinned
# memory, ready for `non_blocking=True` copies. Here is a short loop over a small
# data set, asking for pinned batches only where there is a CUDA GPU to copy to
# (elsewhere PyTorch would warn that it cannot pin). `num_workers=0` loads the
# batches in this process, which keeps the example simple; real training uses
# worker processes too.

# %%
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(512, 32), torch.randn(512, 1))
loader = DataLoader(data, batch_size=64, pin_memory=device.type == "cuda", num_workers=0)
weights = torch.zeros(32, 1, device=device)
total = torch.zeros((), device=device)
for features, targets in loader:
    pinned_as_asked = features.is_pinned() == loader.pin_memory
    features = features.to(device, non_blocking=True)
    targets = targets.to(device, non_blocking=True)
    total += ((features @ weights - targets) ** 2).mean()  # queued, not waited for
print(f"{len(loader)} batches, each pinned as asked: {pinned_as_asked}")
print(f"mean loss of the zero model: {total.item() / len(loader):.2f}")  # one wait, at the end

# %% [markdown]
# Next: [06 – Neural networks and GPUs](06-neural-networks-and-gpus.ipynb) puts a whole
# model on a device.
