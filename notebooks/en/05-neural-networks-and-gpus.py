# %% [markdown]
# # Neural networks and GPUs: putting a model on a device
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/06-neural-networks-and-gpus.ipynb)
#
# As run on an NVIDIA H200: [outputs](../gpu/nvidia-h200/en/06-neural-networks-and-gpus.ipynb) (earlier version).
#
# **What you will learn**
#
# - how to move a model's parameters to a device, and how that differs from moving a tensor;
# - that a model on a GPU computes on that GPU when its input is there too;
# - the idioms the next chapters use: tensors made inside `forward` where the
#   input is, the optimizer built after the move, a model created on the `meta`
#   device and materialised where it will run, and a profiler trace of training.
#
# **What you need**
#
# - [03 – Tensors and GPUs](03-tensors-and-gpus.ipynb) to [05 – Asynchrony and transfers](05-asynchrony-and-transfers.ipynb); a GPU is optional.

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
# ## A model is tensors too
#
# A network's weights and biases are tensors, so they live on a device like any
# other. `nn.Module.to(device)` moves every parameter and buffer of the model.
# Unlike `Tensor.to`, it changes the model in place and hands back the same
# object, so `net = net.to(device)` and plain `net.to(device)` do the same thing.
#
# The next cell picks the first GPU, or the CPU when there is none, and uses it
# once, so that a one-time message from the GPU's runtime lands here rather than
# in a later cell.

# %% tags=["nbval-ignore-output"]
device = d2l_gpu.try_gpu()
torch.ones(1, device=device)
print("this lesson uses", device)

# %% [markdown]
# Here is a network with one linear layer, created on the CPU (with a fixed seed,
# so its weights are the same on every machine) and then moved to that device.

# %%
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(3, 1))
print("net.to(device) is net:", net.to(device) is net)
for name, parameter in net.named_parameters():
    print(f"{name:8} shape {tuple(parameter.shape)}, on {parameter.device}")

# %% [markdown]
# ## Input and model on the same device
#
# Given an input on the same device, the model computes there, and the result
# stays there. On a GPU the printout adds `device='cuda:0'` just before
# `grad_fn=...` (the operation that made the result, which automatic
# differentiation follows back); the values are the same as on the CPU.

# %%
X = torch.ones(2, 3, device=device)
net(X)

# %% [markdown]
# Training keeps everything in one place as long as data and parameters share a
# device: the loss, the gradients and the updated weights all stay on it, and
# nothing crosses the bus. One step of gradient descent
# shows it, written out by hand (`torch.optim.SGD` would do the same update):

# %%
target = torch.zeros(2, 1, device=device)
loss = nn.functional.mse_loss(net(X), target)
loss.backward()
with torch.no_grad():
    for parameter in net.parameters():
        parameter -= 0.1 * parameter.grad
print("loss on", loss.device)
print("weight gradient on", net[0].weight.grad.device)
new_loss = nn.functional.mse_loss(net(X), target)
print("loss after one step is smaller:", new_loss.item() < loss.item())

# %% [markdown]
# The usual mistake is forgetting to move the input. On a GPU machine, the next
# cell feeds a CPU tensor to the model on the GPU and gets an error that names
# both devices and the operation that found them (`addmm`, the matrix product
# inside `nn.Linear`). On a CPU-only machine nothing fails, and the cell prints
# the message a CUDA GPU gives instead.

# %% tags=["nbval-ignore-output"]
if device.type == "cpu":
    print("No GPU: model and input share the CPU. On a CUDA GPU this cell prints:")
    print(
        "RuntimeError: Expected all tensors to be on the same device, but got mat1 is on cpu, "
        "different from other tensors on cuda:0 (when checking argument in method "
        "wrapper_CUDA_addmm)"
    )
else:
    try:
        net(torch.ones(2, 3))
    except RuntimeError as error:
        print(f"{type(error).__name__}: {str(error).splitlines()[0]}")


# %% [markdown]
# ## Creating tensors inside `forward`
#
# A layer often makes tensors of its own while it runs: a starting state, a
# mask, a tensor of positions. Written as `torch.zeros(shape)`, such a tensor
# lands on the CPU even when the model and its input are on a GPU, and the next
# operation fails. Made from the input, it follows the input wherever it is:
# `x.new_zeros(shape)` takes `x`'s device and dtype with a new shape, and
# `torch.zeros_like(x)` also takes its shape. The module below, a tiny recurrent
# cell, makes its starting state that way, so it runs unchanged on any device.

# %%
class TinyRecurrent(nn.Module):
    """Reads a sequence step by step; the state starts as zeros made in forward."""

    def __init__(self, size):
        super().__init__()
        self.cell = nn.Linear(2 * size, size)

    def forward(self, xs):  # xs: (steps, batch, size)
        state = xs.new_zeros(xs.shape[1:])  # where xs is, in xs's dtype
        for x in xs:
            state = torch.tanh(self.cell(torch.cat([x, state], dim=1)))
        return state


rnn = TinyRecurrent(4).to(device)
state = rnn(torch.randn(5, 2, 4, device=device))
print("final state on", state.device, "| zeros_like(state) on", torch.zeros_like(state).device)

# %% [markdown]
# ## Move the model, then build its optimizer
#
# The `torch.optim` documentation asks for the model to be moved *before* its
# optimizer is built, so that the parameters stay where the optimizer first saw
# them. `Module.to` keeps each parameter object and only replaces its data, so
# plain SGD would survive the other order. An optimizer
# with state does not: Adagrad, for one, makes its running sums when it is
# built, next to the parameters as they are then, and moving the model later
# leaves those sums behind. On a GPU machine the first line shows the weight on
# `cuda:0` and the early optimizer's state on `cpu`, and its step fails; torch
# prints
#
# > RuntimeError: Expected all tensors to be on the same device, but found at
# > least two devices, cuda:0 and cpu!
#
# while the optimizer built after the move keeps its state on `cuda:0` and
# steps. On a CPU-only machine nothing moves, so both work.

# %% tags=["nbval-ignore-output"]
torch.manual_seed(0)
model = nn.Linear(3, 1)
early = torch.optim.Adagrad(model.parameters())  # built before the move: a mistake
model.to(device)
late = torch.optim.Adagrad(model.parameters())  # built after the move: the rule
early_at, late_at = (opt.state[model.weight]["sum"].device for opt in (early, late))
print(f"weight on {model.weight.device}; Adagrad state: early on {early_at}, late on {late_at}")
model(torch.ones(2, 3, device=device)).sum().backward()
for name, optimizer in [("early", early), ("late", late)]:
    try:
        optimizer.step()
        print(f"{name} optimizer: step done")
    except RuntimeError as error:
        print(f"{name} optimizer: {type(error).__name__}: {str(error).splitlines()[0]}")

# %% [markdown]
# ## Creating on the device from the start
#
# Building a model on the CPU and then moving it means writing every weight
# twice, in main memory and on the device. `with
# torch.device(device):` makes `device` the default for the tensors and layers
# created inside the block that name no device themselves (the global
# `torch.set_default_device` and its cost are in
# [01](01-introduction.ipynb)):

# %%
with torch.device(device):
    layer = nn.Linear(3, 1)
    noise = torch.randn(2, 3)
print("layer weight on", layer.weight.device, "| noise on", noise.device)
print("outside the block, new tensors go to", torch.ones(1).device)

# %% [markdown]
# For a model too large to build twice, or at all in main memory,
# there is a third place: the `meta` device. A tensor there has a shape and a
# dtype but no memory and no values, so "building" a model on it costs nothing.
# `to_empty(device=...)` then gives every parameter memory on the real device,
# uninitialised, and the layers' own `reset_parameters()` fills it in there:
# the cell checks that the weights are spread as `nn.Linear` draws them,
# uniformly within ±1/√(inputs), which leftover memory would not be. Loading a
# checkpoint is the other way to fill the model; the cell loads the weights of
# a twin built on the CPU and checks that both give the same outputs.

# %%
with torch.device("meta"):
    big = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))
count = sum(parameter.numel() for parameter in big.parameters())
print(f"{count:,} parameters on", big[0].weight.device, "with no memory behind them")
big.to_empty(device=device)
for module in big.modules():
    if isinstance(module, nn.Linear):
        module.reset_parameters()  # the usual random start, drawn on the device
print("after to_empty and reset_parameters:", big[0].weight.device)
bound, weight = 1 / 1024**0.5, big[0].weight  # nn.Linear draws from ±1/sqrt(inputs)
spread = bool(weight.abs().max() <= bound) and abs(weight.std().item() * 3**0.5 / bound - 1) < 0.01
print("first layer's weights spread as nn.Linear draws them:", spread)
torch.manual_seed(0)
twin = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))  # on the CPU
big.load_state_dict(twin.state_dict())  # copies each tensor to where big's tensor is
x = torch.randn(8, 1024)
same = torch.allclose(big(x.to(device)).cpu(), twin(x), atol=1e-3)  # room for TF32 on a GPU
print("with the twin's weights loaded, outputs equal the CPU twin's:", same)

# %% [markdown]
# ## What a training step does on the device
#
# `torch.profiler` records what a few training steps ran, operation by
# operation, and on a CUDA GPU each kernel too. The step below is
# what the rest of the book does: copy a minibatch from the host, forward,
# backward, update, and read the loss with `.item()`. A *schedule* says which
# steps to record: `wait=1` lets the first step run untraced (the first
# kernels load, the libraries start), `warmup=1` runs the profiler through the
# second without keeping it, so that its own start-up lands there, and
# `active=3` records the next three. `trace.step()` marks the end of each step.
#
# The cell then prints the rows with the most time of their own (not counting
# the operations they call): on a CUDA GPU first the kernels and copies the GPU
# ran, by GPU time; then the work on the CPU, by CPU time; then every row that
# copies or waits; last the profiler's own rows.

# %% tags=["nbval-ignore-output"]
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, schedule

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
inputs, targets = torch.randn(512, 64), torch.randn(512, 1)  # on the host, as a loader gives them


def step():
    x, y = inputs.to(device), targets.to(device)  # host-to-device copies (none on a CPU)
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()  # waits for the device, copies one number back


on_cuda = device.type == "cuda"
activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
plan = schedule(wait=1, warmup=1, active=3, repeat=1)
# acc_events=True keeps every cycle's events: one cycle here, so it only silences a warning.
with profile(activities=activities, schedule=plan, acc_events=True) as trace:
    for _ in range(5):
        step()
        trace.step()

OWN = ("ProfilerStep", "Activity Buffer Request", "cudaDeviceSynchronize")  # the profiler's
WAITS = ("aten::copy_", "aten::_to_copy", "aten::item", "aten::_local_scalar_dense", "Memcpy")
WAITS += ("cudaMemcpy", "cudaStreamSynchronize")
rows = [e for e in trace.key_averages() if not e.key.startswith(OWN)]
kernels = [e for e in rows if e.device_type != DeviceType.CPU]  # on a GPU: what it ran
host = [e for e in rows if e.device_type == DeviceType.CPU]


def top(events, time, count):
    return sorted(events, key=lambda event: getattr(event, time), reverse=True)[:count]


def show(title, events):
    print(title)
    for event in events:
        gpu = f"{event.self_device_time_total:12.0f}" if on_cuda else f"{'-':>12}"
        name = event.key.removeprefix("void ")[:40]
        print(f"  {name:<41}{event.count:>6}{event.self_cpu_time_total:12.0f}{gpu}")


print(f"  {'operation or kernel':<41}{'calls':>6}{'self CPU us':>12}{'self GPU us':>12}")
if on_cuda:
    show("kernels and copies on the GPU, by GPU time:", top(kernels, "self_device_time_total", 8))
show("work on the CPU, by CPU time:", top(host, "self_cpu_time_total", 5 if on_cuda else 8))
show("copies and waits, wherever they rank:", [e for e in rows if e.key.startswith(WAITS)])
show("the profiler's own rows:", [e for e in trace.key_averages() if e.key.startswith(OWN)])

# %% [markdown]
# Read the table as a list of suspects. On a CPU, as stored here, the top rows
# are the matrix products (`aten::addmm` forward, `aten::mm` backward) and the
# element-wise work of ReLU, the loss and its gradient. The copies are all
# within main memory: `aten::copy_` is mostly `addmm` copying the bias into its
# output, and `aten::item` with `aten::_local_scalar_dense` reads the loss.
# Nothing crosses to another device and nothing waits: there is only one device.
#
# On a CUDA GPU the first part lists what the GPU ran: matrix-product kernels
# from cuBLAS (usually with `gemm` in their names), element-wise kernels, and
# the copies, `Memcpy HtoD (Pageable -> Device)` for the two inputs of each
# step and `Memcpy DtoH (Device -> Pinned)` for the loss that `.item()` reads
# back. On the CPU the `aten::` operators now only *launch* work, and CUDA
# runtime calls join them: `cudaLaunchKernel` for each kernel,
# `cudaMemcpyAsync` for each copy, and `cudaStreamSynchronize`, whose self CPU
# time is mostly the CPU standing still until the GPU has finished the step.
#
# The last rows are the profiler's own. `ProfilerStep*` is the marker the
# schedule puts around each recorded step; its self time is the step's Python
# outside any operation. On a CUDA GPU, `cudaDeviceSynchronize` is the profiler
# waiting for the GPU when it stops, so that every kernel is in, and `Activity
# Buffer Request` is CUPTI, NVIDIA's tracing library, asking for memory for its
# records. The warm-up step makes most of that happen before the recording;
# without a schedule, such start-up costs rank among the operations. Some torch
# versions also warn on every trace that the profiler "clears events at the end
# of each cycle"; that concerns repeating schedules, and `acc_events=True`
# silences it. For a timeline instead of a table,
# `trace.export_chrome_trace(path)` writes a file that Perfetto or
# `chrome://tracing` shows.

# %% [markdown]
# ## What this lesson showed
#
# - `net.to(device)` moves a model's parameters in place; a model computes on
#   the device where it and its input are, and fails loudly when they differ.
# - Tensors made inside `forward` with `new_zeros` or `zeros_like` follow the
#   input, so a module runs on any device.
# - The model moves before its optimizer is built, so the optimizer's state
#   is made beside the parameters.
# - `torch.device(...)` as a context manager creates tensors and layers on a
#   device from the start; the `meta` device builds a model with no memory,
#   and `to_empty` plus initialisation makes it real where it will run.
# - A profiler trace, recorded after a warm-up on a schedule, shows which
#   operations and kernels a step runs, and where its copies and waits are.
#
# Reading and writing a model's parameters across devices, for instance saving
# on a GPU and loading on a CPU, is one of the [exercises](08-exercises.ipynb).
# Next: [07 – Summary](07-summary.ipynb).
