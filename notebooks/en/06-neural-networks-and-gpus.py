# %% [markdown]
# # Neural networks and GPUs: putting a model on a device
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/06-neural-networks-and-gpus.ipynb)
#
# **What you will learn**
#
# - how to move a model's parameters to a device, and how that differs from moving a tensor;
# - that a model on a GPU computes on that GPU when its input is there too;
# - how to create tensors and models on a device from the start, with
#   `torch.device` as a context manager or a default device.
#
# **What you need**
#
# - [03 – Tensors and GPUs](03-tensors-and-gpus.ipynb); a GPU is optional.

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
# Here is a network with one linear layer, created on the CPU (with a fixed seed,
# so its weights are the same on every machine) and then moved to the first GPU,
# or left on the CPU when there is none.

# %%
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(3, 1))
device = d2l_gpu.try_gpu()
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
# device: the loss, the gradients and the updated weights all stay on it, and no
# data crosses the bus between the CPU and the GPU. One step of gradient descent
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
# inside `nn.Linear`). On a CPU-only machine model and input are both on the
# CPU, so nothing fails; the cell prints the message a CUDA GPU gives instead.

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
# ## Creating on the device from the start
#
# Building a model on the CPU and then moving it means writing every weight
# twice: once in main memory, once more on the GPU. Since PyTorch 2.0 there are
# two ways to create tensors, and the parameters of new layers, directly on a
# device:
#
# - `with torch.device(device):` makes it the default for the code inside the block;
# - `torch.set_default_device(device)` makes it the default for everything that
#   follows, until it is changed back.
#
# Both apply only to code that does not name a device itself. The context
# manager is the safer choice in a notebook, because it cannot leak into later cells.

# %%
with torch.device(device):
    layer = nn.Linear(3, 1)
    noise = torch.randn(2, 3)
print("layer weight on", layer.weight.device, "| noise on", noise.device)
print("outside the block, new tensors go to", torch.ones(1).device)

# %% [markdown]
# A default device set with `torch.set_default_device` stays until it is reset, so
# we restore the previous default in a `finally` block, even if something fails.

# %%
previous = torch.get_default_device()
torch.set_default_device(device)
try:
    print("while set, new tensors go to", torch.zeros(1).device)
finally:
    torch.set_default_device(previous)
print("after resetting, new tensors go to", torch.zeros(1).device)

# %% [markdown]
# Reading and writing a model's parameters across devices, for instance saving
# on a GPU and loading on a CPU, is one of the
# [exercises](08-exercises.ipynb). Next: [07 – Summary](07-summary.ipynb).
