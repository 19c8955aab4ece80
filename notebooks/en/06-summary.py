# %% [markdown]
# # Summary: the rules of this section
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/06-summary.ipynb)
#
# What a GPU printed for these lessons: [notebooks/gpu](../gpu/README.md).
#
# **What you will learn**
#
# - the section's rules, each with the lesson that shows it;
# - the book's typical mistake, logging a loss at every step, and its remedy.
#
# **What you need**
#
# - lessons [01](01-introduction.ipynb) to
#   [05](05-neural-networks-and-gpus.ipynb); a GPU is optional.

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
# ## The rules
#
# 1. **We choose where data is stored and computed.** PyTorch puts a tensor on
#    the CPU unless told otherwise. Pick the device once, with
#    `d2l_gpu.try_gpu()`, and pass it everywhere ([01](01-introduction.ipynb),
#    [02](02-computing-devices.ipynb)).
# 2. **All inputs of one operation live on one device.** PyTorch raises an error
#    rather than copying behind our back ([03](03-tensors-and-gpus.ipynb)). A
#    model's parameters are inputs too: move the model before building its
#    optimizer ([05](05-neural-networks-and-gpus.ipynb)).
# 3. **`.to(device)` copies only when it must.** On the tensor's own device it
#    returns the same tensor; to another device it allocates new memory there
#    ([03](03-tensors-and-gpus.ipynb)).
# 4. **Move data rarely and in large pieces.** On a GPU a transfer costs more
#    than simple arithmetic on the same data, and every transfer pays a fixed
#    cost ([04](04-asynchrony-and-transfers.ipynb)).
# 5. **A GPU works through a queue.** Python runs ahead, so whatever brings a
#    value to the host (`print`, `.item()`, `.cpu()`) first waits for the work
#    queued before it ([04](04-asynchrony-and-transfers.ipynb)).
#
# ## The typical mistake
#
# The book's typical mistake is turning each minibatch's loss into a Python
# number to log it: the host then waits at every step instead of queueing the
# next one, which can cost up to the host's and the GPU's time added together
# ([04](04-asynchrony-and-transfers.ipynb) explains and measures it). Keep the
# log on the device and copy it once, as below. Waits also hide where nobody
# wrote `.item()`; `torch.cuda.set_sync_debug_mode("warn")` finds them.

# %%
device = d2l_gpu.try_gpu()
features = torch.randn(256, 8, device=device)
labels = features @ torch.ones(8, 1, device=device)
w = torch.zeros(8, 1, device=device, requires_grad=True)
losses = torch.zeros(20, device=device)  # the log, on the device
for step in range(20):
    loss = ((features @ w - labels) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
        w.grad.zero_()
    losses[step] = loss.detach()  # no wait
history = losses.tolist()  # one copy, one wait, at the end
print(f"{len(history)} losses reached the host in one copy")
print("the loss went down:", history[-1] < history[0])

# %% [markdown]
# ## What this lesson showed
#
# - Five rules: choose the device, keep an operation's inputs together, copy
#   only when needed, move data rarely and in bulk, mind the queue.
# - A log kept on the device spares the host a wait at every step.
#
# Next: [07 – Exercises](07-exercises.ipynb) answers the book's four questions
# by measuring.
