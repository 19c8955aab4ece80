# %% [markdown]
# # Neural networks and GPUs: putting a model on a device
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/05-neural-networks-and-gpus.ipynb)
#
# What a GPU printed for these lessons: [notebooks/gpu](../gpu/README.md).
#
# **What you will learn**
#
# - how to put a model on a device, and how `Module.to` differs from `Tensor.to`;
# - where its parameters, outputs and gradients live, and what happens when its
#   input is elsewhere;
# - two habits: tensors made inside `forward` follow the input, and the
#   optimizer is built after the model has moved.
#
# **What you need**
#
# - [03 – Tensors and GPUs](03-tensors-and-gpus.ipynb), for the rule that an
#   operation's inputs share one device; a GPU is optional.

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
# ## A model is made of tensors
#
# A network's weights and biases are tensors, so each lives on a device like
# any other tensor. `net.to(device)` moves every parameter and buffer of the
# model there. Unlike `Tensor.to`, which returns a tensor (a new one when it
# copies), `Module.to` changes the model in place and returns the same object,
# so `net = net.to(device)` and a plain `net.to(device)` do the same thing.
#
# This lesson uses the first GPU, or the CPU when there is none. The cell uses
# the device once, so that a one-time message from the GPU's runtime appears
# here rather than in a later cell.

# %% tags=["nbval-ignore-output"]
device = d2l_gpu.try_gpu()
torch.ones(1, device=device)
print("this lesson uses", device)

# %% [markdown]
# The book's network, one linear layer, is built on the CPU with a fixed seed
# (the same weights on every machine) and then moved:

# %%
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(3, 1))
print("net.to(device) is net:", net.to(device) is net)
for name, parameter in net.named_parameters():
    print(f"{name:8} shape {tuple(parameter.shape)}, on {parameter.device}")

# %% [markdown]
# ## The output stays where the model computed it
#
# Given an input on the same device, the model computes there, and its output
# stays there. On a GPU the tensor below is printed with `device='cuda:0'`
# before `grad_fn=...` (the operation that produced it, which automatic
# differentiation follows back); the numbers are the same as on a CPU.

# %%
X = torch.ones(2, 3, device=device)
net(X)

# %% [markdown]
# As long as data and parameters share a device, training stays on it too: the
# loss, the gradients and the updated weights are all made there, and nothing
# crosses the bus. One step of gradient descent by hand shows it:

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
# ## Input and model on different devices
#
# The usual mistake is to move the model and forget the input. The matrix
# product inside `nn.Linear` (`addmm`) then gets one operand in main memory and
# the other on the GPU, and PyTorch refuses rather than copying behind your
# back, as [03](03-tensors-and-gpus.ipynb) showed for tensors. On a GPU machine
# the next cell feeds the model a CPU tensor; without a GPU, a `meta` tensor
# stands in for the second device, and the error is worded differently. For the CPU tensor, an H200 printed
#
# > RuntimeError: Expected all tensors to be on the same device, but got mat1
# > is on cpu, different from other tensors on cuda:0 (when checking argument
# > in method wrapper_CUDA_addmm)
#
# No GPU has run the cell as it is now.

# %%
elsewhere = "meta" if device.type == "cpu" else "cpu"  # meta: a stand-in second device
try:
    net(torch.ones(2, 3, device=elsewhere))
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")


# %% [markdown]
# ## Tensors made inside `forward`
#
# A layer often makes tensors of its own while it runs: a starting state, a
# mask, positions. Written as `torch.zeros(shape)`, such a tensor lands on the
# CPU even when the model and its input are on a GPU, and the next operation
# fails. Made from the input, it follows the input:
# `x.new_zeros(shape)` takes `x`'s device and dtype with a new shape, and
# `torch.zeros_like(x)` takes its shape as well. The tiny recurrent cell below
# makes its starting state that way, so it runs unchanged on any device.

# %%
class TinyRecurrent(nn.Module):
    # Reads a sequence step by step, starting from a state of zeros.
    def __init__(self, size):
        super().__init__()
        self.cell = nn.Linear(2 * size, size)

    def forward(self, xs):  # xs: (steps, batch, size)
        state = xs.new_zeros(xs.shape[1:])  # on xs's device, in xs's dtype
        for x in xs:
            state = torch.tanh(self.cell(torch.cat([x, state], dim=1)))
        return state


rnn = TinyRecurrent(4).to(device)
state = rnn(torch.randn(5, 2, 4, device=device))
print("final state on", state.device, "| zeros_like(state) on", torch.zeros_like(state).device)

# %% [markdown]
# ## Move the model, then build its optimizer
#
# The `torch.optim` documentation asks for the model to be moved before its
# optimizer is built. `Module.to` keeps each parameter object and only swaps
# the data inside it, so plain SGD survives the other order, and so do Adam and
# RMSprop, which make their state at the first step. Adagrad does not: it makes
# a running sum for each parameter when it is built, beside the parameter as it
# is then, and a later move leaves the sums behind. On a GPU the cell shows the weight on `cuda:0`
# and the early optimizer's state on `cpu`, and that optimizer's step fails;
# an H200 printed torch's message:
#
# > RuntimeError: Expected all tensors to be on the same device, but found at
# > least two devices, cuda:0 and cpu!
#
# The optimizer built after the move keeps its state on `cuda:0` and steps. On
# a CPU-only machine nothing moves, so both optimizers step.

# %%
torch.manual_seed(0)
model = nn.Linear(3, 1)
early = torch.optim.Adagrad(model.parameters())  # built before the move: the mistake
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
        print(f"{name} optimizer: {type(error).__name__}: {error}")

# %% [markdown]
# ## What this lesson showed
#
# - `net.to(device)` moves a model's parameters in place. The model then
#   computes on that device, and its output, loss and gradients stay there.
# - An input on another device stops the model with an error naming both.
# - Tensors made inside `forward` with `new_zeros` or `zeros_like` follow the
#   input, so a module runs on any device.
# - Move the model first, then build its optimizer, so that the optimizer's
#   state is made beside the parameters.
#
# Saving parameters on one device and loading them on another is one of the
# [exercises](07-exercises.ipynb); models without memory and the profiler come
# beyond the book, in [10](10-profiler-and-meta.ipynb).
#
# Next: [06 – Summary](06-summary.ipynb), the rules of this section in one place.
