# %% [markdown]
# # Summary: three rules, and the most common mistake measured
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/07-summary.ipynb)
#
# **What you will learn**
#
# - the section in three rules;
# - what logging a training loss at every step costs, measured against keeping
#   the log on the device and moving it once.
#
# **What you need**
#
# - notebooks [01](01-introduction.ipynb) to [06](06-neural-networks-and-gpus.ipynb);
#   a GPU is optional.

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
# ## The section in three rules
#
# 1. **We choose where data is stored and computed.** A tensor or a model lives
#    on the CPU or on a particular GPU; PyTorch starts on the CPU, and
#    `d2l_gpu.try_gpu()` picks a GPU when there is one.
# 2. **All inputs of one operation must be on the same device.** PyTorch raises
#    an error rather than copying behind our back.
# 3. **Moving data is expensive, so move it rarely and in bulk.** A copy between
#    host and GPU is slow next to the work it feeds, every transfer has a fixed
#    cost, and reading a value back makes the CPU wait for the GPU.
#
# ## The typical mistake
#
# A training loop computes each minibatch's loss on the GPU and, to show
# progress or keep a history, turns it into a Python number straight away with
# `loss.item()`, or appends it to a NumPy array. Each of these waits until the
# GPU has finished everything queued so far and then copies one number over the
# bus. While Python waits, it queues no new work, so the GPU runs dry between
# steps. Keeping the log as a tensor on the device and moving it once at the end
# avoids both costs.
#
# The book blames Python's global interpreter lock (GIL) for the stall. That is
# not where the time goes: PyTorch releases the GIL while `.item()` waits, so
# other Python threads keep running. What is lost is the *queue*. The thread
# that drives training cannot launch step `k + 1` before step `k` has finished
# on the GPU and its number has crossed the bus, so each step adds a round trip
# (a synchronization and a tiny copy), and the GPU idles while Python prepares
# the next step's launches.
#
# Here is a small regression trained both ways. The two loops do the same
# arithmetic and record the same losses; they differ only in when the losses
# come back to the host.

# %%
from torch import nn

device = d2l_gpu.try_gpu()
torch.manual_seed(0)
features = torch.randn(256, 16, device=device)
labels = features @ torch.randn(16, 1, device=device)


def train(log_every_step, steps=50):
    """Train a fresh linear model; return the loss of every step as Python floats."""
    torch.manual_seed(0)
    net = nn.Linear(16, 1).to(device)
    history = [] if log_every_step else torch.empty(steps, device=device)
    for step in range(steps):
        loss = nn.functional.mse_loss(net(features), labels)
        net.zero_grad()
        loss.backward()
        with torch.no_grad():  # plain gradient descent, as torch.optim.SGD does it
            for parameter in net.parameters():
                parameter -= 0.05 * parameter.grad
        if log_every_step:
            history.append(loss.item())  # waits for the device, copies one number
        else:
            history[step] = loss.detach()  # stays on the device
    return history if log_every_step else history.tolist()  # one copy at the end


each_step, at_the_end = train(True), train(False)
print("same losses both ways:", each_step == at_the_end)
print("loss went down:", at_the_end[-1] < at_the_end[0])

# %% [markdown]
# Now the cost of each, timed with `d2l_gpu.benchmark` (synchronized, median and
# IQR of repeated runs). As in notebook 03, PyTorch uses one CPU thread while it
# measures, so that on a small shared machine the result does not depend on how
# soon a second core wakes up:

# %% tags=["nbval-ignore-output"]
slow = d2l_gpu.benchmark(
    train, True, device=device, min_run_time=0.1, num_threads=1, label=".item() every step"
)
fast = d2l_gpu.benchmark(
    train, False, device=device, min_run_time=0.1, num_threads=1, label="one copy at the end"
)
print(slow)
print(fast)
print(f"on {device}, logging every step takes {slow.median / fast.median:.2f}x as long")

# %% [markdown]
# On a CPU-only machine, as in the stored output, the two loops cost about the
# same: there is no separate device to wait for, and turning a CPU tensor into a
# Python number is a tiny part of a training step. What gap the cell prints there
# is within the spread (IQR) of the runs, which a busy machine widens. The
# lesson shows on a GPU, where each
# `.item()` drains the GPU's queue. How large the gap is there depends on the
# model: the smaller each step, the larger the share of time lost to waiting.
# Run this cell on a GPU to see it.
#
# ## Where to go from here
#
# - [08 – Exercises](08-exercises.ipynb): larger and smaller computations on CPU
#   and GPU, saving and loading parameters across devices, this logging
#   experiment with 1000 matrix products, and two GPUs working at once.
# - [09 – Beyond one machine](09-beyond-one-machine.ipynb): several GPUs and
#   several servers.
