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
# - lessons [01](01-introduction.ipynb) to [06](06-neural-networks-and-gpus.ipynb);
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

# %% tags=["nbval-ignore-output"]
device = d2l_gpu.try_gpu()
# First use of the device: a one-time warning from its runtime lands here, in a
# cell whose output is not compared, rather than in the next one.
torch.ones(1, device=device)
print("training on", device)

# %%
from torch import nn

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
# IQR of repeated runs). PyTorch uses one CPU thread while it measures, so that
# on a small shared machine the result does not depend on how soon a second
# core wakes up. The cell prints its own verdict: it calls a gap real only when
# the difference of the medians exceeds the larger of the two IQRs.

# %% tags=["nbval-ignore-output", "key-result"]
slow = d2l_gpu.benchmark(
    train, True, device=device, min_run_time=0.3, num_threads=1, label=".item() every step"
)
fast = d2l_gpu.benchmark(
    train, False, device=device, min_run_time=0.3, num_threads=1, label="one copy at the end"
)
print(slow)
print(fast)
gap, spread = slow.median - fast.median, max(slow.iqr, fast.iqr)
winner = "one copy at the end" if gap > 0 else ".item() every step"
print(f"on {device}, logging every step takes {slow.median / fast.median:.2f}x as long")
if abs(gap) > spread:
    print(f"verdict: {winner} is faster; the gap is {abs(gap) / spread:.1f}x the larger IQR")
else:
    print("verdict: no clear winner; the gap is within the larger IQR")

# %% [markdown]
# ## Reading the verdict
#
# On a CPU-only machine there is no separate device to wait for, so `.item()`
# is only a read of one number in main memory. The loop that keeps its log "on
# the device" does a little more each step: `history[step] = loss.detach()` is
# an indexed copy, one more operation through PyTorch's dispatcher. On a CPU
# that extra operation can cost more than the read it replaces, so there the
# `.item()` loop may come out slightly ahead, or the two may tie; the cell
# says which it found on this machine.
#
# On a GPU the order should reverse. The indexed copy is one more kernel in
# the queue and costs the CPU only its launch, while each `.item()` forces a
# synchronization: the CPU stops until the GPU has finished the step, and only
# then prepares the next one. A GPU reader should therefore expect the
# one-copy loop to win, by more the smaller each step is. That is an
# expectation, not a measurement: run the cell on a GPU to see the figure.
# [Exercise 3](08-exercises.ipynb) repeats the experiment with a heavier step.

# %% [markdown]
# ## What this lesson showed
#
# - The section fits in three rules: we choose the device, every operand of
#   one operation shares it, and data moves rarely and in bulk.
# - Turning a loss into a Python number at every step makes a GPU's queue run
#   dry; a log kept as a tensor on the device and copied once avoids it.
# - A timing comparison means something only next to its spread, and a CPU
#   run cannot show a cost that comes from waiting for a GPU.
#
# Next: [08 – Exercises](08-exercises.ipynb) (larger and smaller computations,
# saving parameters across devices, this logging experiment with heavier steps,
# two GPUs at once), then [09 – Beyond one machine](09-beyond-one-machine.ipynb).
