# %% [markdown]
# # The profiler and the meta device: where time goes, and models without memory
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/10-profiler-and-meta.ipynb)
#
# What a GPU printed for these lessons: [notebooks/gpu](../gpu/README.md).
#
# *Beyond the book: this lesson goes past the chapter.*
#
# **What you will learn**
#
# - how to record a few training steps with `torch.profiler`, on a schedule
#   that keeps start-up costs out of the record;
# - how to read what it recorded: the operations and kernels with the most
#   time of their own, and where a step copies and waits;
# - how to create a model directly on a device, or on the `meta` device with no
#   memory at all, and then give it memory and values where it will run.
#
# **What you need**
#
# - [05 – Neural networks and GPUs](05-neural-networks-and-gpus.ipynb) for a
#   model on a device, and [04 – Asynchrony and
#   transfers](04-asynchrony-and-transfers.ipynb) for why the CPU's time and
#   the GPU's time differ;
# - a GPU is optional. On a CPU the profiler records only the CPU's side.

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
# ## A training step to look at
#
# A clock, as in [09](09-timing-a-gpu.ipynb), says how long a step takes; a
# profiler says what the step spent that time on. The step below is the one
# the rest of the book runs: copy a minibatch from main memory to the device,
# run the forward and backward passes, update the weights, and read the loss
# with `.item()`. The model is small, so that the CPU run stays short.

# %% tags=["nbval-ignore-output"]
from torch import nn

device = d2l_gpu.try_gpu()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
inputs, targets = torch.randn(512, 64), torch.randn(512, 1)  # in main memory, like a batch


def step():
    x, y = inputs.to(device), targets.to(device)  # copies to the device (none on a CPU)
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()  # waits for the device and copies one number back


print("this lesson uses", device)

# %% [markdown]
# ## Recording a few steps
#
# `torch.profiler.profile` records every operation PyTorch runs on the CPU.
# Given `ProfilerActivity.CUDA` as well, it also records each kernel and copy
# that a CUDA GPU runs, with the time it took on the GPU.
#
# The first steps of a run are not typical: kernels are loaded, libraries start
# up, and the profiler sets itself up too. A *schedule* says which steps to keep.
# With `wait=1` the first step runs untraced; with `warmup=1` the profiler
# traces the second step and throws the result away, so that its own start-up
# lands there; `active=3` keeps the next three. `trace.step()` marks where each
# step ends. A schedule can repeat in cycles, and some torch versions warn that
# the profiler "clears events at the end of each cycle"; `acc_events=True`
# keeps every cycle's events, which for our single cycle only silences that
# warning.
#
# The cell's first line quiets Kineto, the library that does the recording.
# Without it, Kineto writes a start line and a stop line to the error stream
# at every trace. Level 6 lies above all its levels, so its error messages go
# too: remove the line when a trace comes out empty and you want to know why.

# %%
import os

os.environ["KINETO_LOG_LEVEL"] = "6"  # read when the first trace starts
from torch.profiler import ProfilerActivity, profile, schedule

on_cuda = device.type == "cuda"
activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
plan = schedule(wait=1, warmup=1, active=3)
with profile(activities=activities, schedule=plan, acc_events=True) as trace:
    for _ in range(5):
        step()
        trace.step()
events = trace.key_averages()  # one row per name, summed over the three kept steps
print("steps kept:", next(e.count for e in events if e.key.startswith("ProfilerStep")))

# %% [markdown]
# ## Reading the table
#
# Each row of `key_averages()` is one operation or kernel, with its number of
# calls and its *self* time: the time spent in the row's own code, not in the
# operations it called. (The matrix product inside a linear layer, for instance,
# counts as `aten::addmm`'s time, not the layer's.) The cell prints three parts:
#
# - on a CUDA GPU, the kernels and copies that the GPU ran, ordered by their
#   time on the GPU;
# - the operations on the CPU, ordered by their time on the CPU;
# - the rows this lesson names below, wherever they rank.
#
# The profiler's own rows stay out of the ranked lists and are named on the
# last line. On a GPU, CUPTI, NVIDIA's library through which the profiler
# records kernels, reports its own work as rows such as `Activity Buffer
# Request`, which can otherwise top the CPU list. The profiler also copies its
# markers (`ProfilerStep*`, `Optimizer.step#SGD.step`) onto the GPU's
# timeline; each spans a whole stretch of GPU time, idle gaps included, and
# would top the kernels.
#
# Times are in microseconds and change from run to run.
# `events.table(sort_by="self_device_time_total", row_limit=10)` prints
# PyTorch's own version, with more columns.

# %% tags=["nbval-ignore-output"]
from torch.autograd import DeviceType

NAMED = ["aten::addmm", "aten::mm", "aten::item", "ProfilerStep*"]
if on_cuda:
    NAMED += ["Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)"]
    NAMED += ["cudaLaunchKernel", "cudaStreamSynchronize"]
OWN = ["Activity Buffer Request", "Buffer Flush", "Instrumentation", "Resource"]  # CUPTI's work
OWN += ["Driver Compiler", "Lazy Function Loading", "Runtime Triggered Module Loading"]
OWN += ["Command Buffer Full", "UVM Activity Init", "Unknown"]


def show(title, rows):
    print(title)
    for e in rows:
        gpu = f"{e.self_device_time_total:12.0f}" if on_cuda else f"{'-':>12}"
        name = e.key.removeprefix("void ")[:40]
        print(f"  {name:<41}{e.count:>6}{e.self_cpu_time_total:12.0f}{gpu}")


def ranked(rows, time, count):
    return sorted(rows, key=lambda e: getattr(e, time), reverse=True)[:count]


def marker_on_gpu(e):
    # a marker's span on the GPU's timeline, not a kernel (on the CPU, markers are rows)
    return e.is_user_annotation and e.device_type != DeviceType.CPU


print(f"  {'operation or kernel':<41}{'calls':>6}{'self CPU us':>12}{'self GPU us':>12}")
steps = [e for e in events if e.key not in OWN and not marker_on_gpu(e)]  # profiler's own, apart
if on_cuda:
    on_gpu = [e for e in steps if e.device_type != DeviceType.CPU]
    show("on the GPU, by GPU time:", ranked(on_gpu, "self_device_time_total", 6))
on_cpu = [e for e in steps if e.device_type == DeviceType.CPU]
show("on the CPU, by CPU time:", ranked(on_cpu, "self_cpu_time_total", 6))
show("rows named in the text:", [e for name in NAMED for e in steps if e.key == name])
print("named but not recorded:", [n for n in NAMED if n not in {e.key for e in events}] or "none")
own = [e.key + (" (GPU)" if marker_on_gpu(e) else "") for e in events if e not in steps]
print("the profiler's own rows:", own or "none")

# %% [markdown]
# Read the table as a list of places to look, not as a verdict. On a CPU, as
# stored here, every row is work the CPU did itself. Among the rows named, the
# matrix products appear as `aten::addmm` (each linear layer's forward pass:
# the product plus the bias) and `aten::mm` (the products of the backward
# pass). `aten::item` reads the loss; on a CPU it has nothing to wait for, so
# its self time is tiny. `ProfilerStep*` is the marker the schedule puts around
# each kept step. Its self time is mostly the step's Python outside any
# operation.
#
# On a CUDA GPU the picture changes, and the named rows show how. The `aten::`
# rows on the CPU now only *launch* work, so their CPU times measure launching,
# and the GPU part of the table carries the arithmetic: kernels under the names
# their libraries gave them, and two kinds of copy. `Memcpy HtoD (Pageable -> Device)`
# is the two inputs of each step going to the GPU, and `Memcpy DtoH (Device ->
# Pinned)` is the loss coming back for `.item()`. On the CPU side, CUDA runtime
# calls join the list: `cudaLaunchKernel`, once for each kernel, and
# `cudaStreamSynchronize`, three times a step. `.item()` waits there for the
# loss, and so does each of the two `.to(device)` copies: from ordinary
# (pageable) memory, PyTorch queues the copy and then waits until the GPU's
# queue is empty. The self CPU time of `cudaStreamSynchronize` is mostly the
# CPU standing idle. Pinned memory with `non_blocking=True`, as in
# [04](04-asynchrony-and-transfers.ipynb), queues a copy without that wait. A
# named row that the run did not record is listed on the line before last
# rather than left out silently. This paragraph follows the PyTorch source;
# whether a GPU has run the cell as it stands is on the GPU page linked at the
# top.
#
# For a timeline instead of a table, `trace.export_chrome_trace(path)` writes
# a file that [Perfetto](https://ui.perfetto.dev) opens. There the gaps show
# too: stretches where the GPU sat idle while Python prepared the next launch.

# %% [markdown]
# ## Creating a model on its device
#
# A model built on the CPU and then moved is written twice: once into main
# memory, then again into the device's memory. Used as a context manager,
# `torch.device(device)` makes `device` the default for every tensor and layer
# created inside the block that does not name a device of its own:

# %%
with torch.device(device):
    layer = nn.Linear(3, 1)
    noise = torch.randn(2, 3)
print("layer weight on", layer.weight.device, "| noise on", noise.device)
print("outside the block, new tensors go to", torch.ones(1).device)

# %% [markdown]
# ## A model with no memory: the `meta` device
#
# For a model too large to build twice, or to build in main memory at all,
# there is a third place to create it: the `meta` device. A tensor there has a
# shape and a dtype but no memory and no values, so building a model there is
# almost free, and its shapes and parameter count can be checked before any
# memory is spent. `to_empty(device=...)` then gives each parameter and buffer
# memory on the real device, uninitialised, and each layer's own
# `reset_parameters()` fills it with the usual start, drawn right there. The
# cell calls it on every module that has one, so that buffers such as
# BatchNorm's running statistics are filled too; a buffer that no such method
# sets must be set by hand.
#
# The cell checks that the fill happened: `nn.Linear` draws its weights
# uniformly from ±1/√n, with n the number of inputs, so all of them lie within
# that bound and their standard deviation is the bound divided by √3. Whatever
# happened to be left in the memory would not pass that test.

# %%
with torch.device("meta"):
    big = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))
count = sum(parameter.numel() for parameter in big.parameters())
print(f"{count:,} parameters on", big[0].weight.device, "with no memory behind them")
big.to_empty(device=device)
for module in big.modules():
    if hasattr(module, "reset_parameters"):
        module.reset_parameters()  # the usual start, drawn on the device
print("after to_empty and reset_parameters:", big[0].weight.device)
bound, weight = 1 / 1024**0.5, big[0].weight  # nn.Linear's bound, 1/sqrt(inputs)
within = bool(weight.abs().max() <= bound)
spread = abs(weight.std().item() * 3**0.5 / bound - 1) < 0.01  # std of a uniform: bound/sqrt(3)
print("first layer's weights are drawn as nn.Linear draws them:", within and spread)

# %% [markdown]
# Loading a checkpoint is the other way to fill such a model. The next cell
# builds a twin of the same shape on the CPU and loads its weights into the
# model; `load_state_dict` copies each tensor to wherever the model's tensor
# already is. Then both compute the same input, and the cell checks that the
# outputs agree.
#
# How closely should they agree? On a CPU both runs are the same computation.
# On a GPU the kernels add up the products in another order, and since a
# float32 keeps about seven significant digits, the order changes the last of
# them. Matrix products in float32 on a CUDA GPU are computed in full float32
# unless TF32 is switched on (lesson [12](12-remedies.ipynb)), so an
# absolute tolerance of 1e-5 leaves room for the order and none for a wrong
# weight. No GPU has run this cell yet.

# %%
torch.manual_seed(0)
twin = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))  # on the CPU
big.load_state_dict(twin.state_dict())  # copies each tensor to where big's tensor is
x = torch.randn(8, 1024)
same = torch.allclose(big(x.to(device)).cpu(), twin(x), atol=1e-5)  # room for summation order
print("with the twin's weights loaded, the outputs equal the CPU twin's:", same)

# %% [markdown]
# ## What this lesson showed
#
# - `torch.profiler` with a schedule records a few steps after a warm-up, so
#   that start-up costs stay out of the record. `key_averages()` sums the
#   record by name: what ran, how often, and how long each took by itself.
# - On a CPU the table lists the work itself. On a CUDA GPU it lists the
#   kernels and copies the GPU ran, by GPU time, and the CPU's rows show
#   launches and waits: `cudaStreamSynchronize` behind `.item()` and behind
#   each copy from ordinary memory.
# - `with torch.device(device):` creates tensors and layers on a device from
#   the start. The `meta` device builds a model with shapes but no memory;
#   `to_empty` and `reset_parameters()`, or a loaded checkpoint, make it real
#   on the device where it will run.
#
# Next: [11 – Three limits](11-three-limits.ipynb), on what bounds a GPU
# program: compute, memory bandwidth or overhead.
