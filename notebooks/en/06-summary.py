# %% [markdown]
# # Summary: three rules, and the most common mistake measured
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/07-summary.ipynb)
#
# As run on an NVIDIA H200: [outputs](../gpu/nvidia-h200/en/07-summary.ipynb) (earlier version).
#
# **What you will learn**
#
# - the section in three rules;
# - what logging a training loss at every step costs, measured against keeping
#   the log on the device and moving it once;
# - why that cost shows only when the host and the GPU take about as long per step.
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
# Here is a small regression, a two-layer network fitted by gradient descent,
# trained both ways. The two loops do the same arithmetic and record the same
# losses; they differ only in when the losses come back to the host.

# %% tags=["nbval-ignore-output"]
device = d2l_gpu.try_gpu()
# First use of the device: a one-time warning from its runtime lands here, in a
# cell whose output is not compared, rather than in the next one.
torch.ones(1, device=device)
print("training on", device)

# %%
import functools
import math

from torch import nn


def make_step(width, batch=1024, lr=0.05):
    """One gradient-descent step of a fresh network `width` features wide; returns the loss."""
    torch.manual_seed(0)
    features = torch.randn(batch, width, device=device)
    labels = features @ torch.randn(width, 1, device=device) / math.sqrt(width)
    net = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1)).to(device)

    def step():
        loss = nn.functional.mse_loss(net(features), labels)
        net.zero_grad()
        loss.backward()
        with torch.no_grad():  # plain gradient descent, as torch.optim.SGD does it
            for parameter in net.parameters():
                parameter -= lr * parameter.grad
        return loss.detach()

    return step


def train(step, log_every_step, steps=50):
    """Run `steps` steps; return the loss of every step as Python floats."""
    history = [] if log_every_step else torch.empty(steps, device=device)
    for i in range(steps):
        loss = step()
        if log_every_step:
            history.append(loss.item())  # waits for the device, copies one number
        else:
            history[i] = loss  # stays on the device
    return history if log_every_step else history.tolist()  # one copy at the end


each_step, at_the_end = train(make_step(16), True), train(make_step(16), False)
print("same losses both ways:", each_step == at_the_end)
print("loss went down:", at_the_end[-1] < at_the_end[0])

# %% [markdown]
# ## When waiting costs
#
# A step costs the host some time to queue its kernels, and the GPU some time to
# run them. With the log kept on the device the two overlap: while the GPU runs
# step `k`, Python queues step `k + 1`, and a step costs about the larger of the
# two times. With `.item()` they take turns, so a step costs their sum plus a
# round trip. The cost is largest, up to about twice the time, when host and
# device time per step are equal; when one of them dominates, the other hides
# behind it. At 16 features wide, the regression above is so small that a GPU
# finishes each step long before Python has queued the next: there the warning
# barely shows.
#
# So on a CUDA GPU the next cell measures both times per step for growing widths:
# the host's with the clock, while large products keep the GPU busy so that the
# steps only queue; the GPU's with two CUDA events around those same steps
# (`d2l_gpu.host_and_device_seconds` does both). It takes the width where the
# two match. On a CPU there is no queue: a call returns when its work is done,
# host and device time are one, and every width behaves like width 16, so the
# cell keeps that width only.

# %% tags=["nbval-ignore-output"]
widths, per_step = [16], {}  # the width above; host and GPU seconds per step
if device.type == "cuda":
    mismatch = {}  # how far apart the two times are, on a log scale
    print(f"{'width':>6} {'host per step':>14} {'GPU per step':>13}")
    for k in range(15):  # widths 32 to 4096, by factors of sqrt(2)
        width = round(32 * 2 ** (k / 2))
        host, gpu = per_step[width] = d2l_gpu.host_and_device_seconds(make_step(width), device)
        print(f"{width:>6} {host * 1e6:>11.1f} us {gpu * 1e6:>10.1f} us")
        mismatch[width] = abs(math.log(gpu / host))
        if gpu > host:  # wider only drifts further apart
            break
    widths.append(min(mismatch, key=mismatch.get))
    print(f"host and GPU time per step match best at width {widths[-1]}")
elif device.type == "cpu":
    print("no queue on the CPU: host and device time per step are one; width 16 only")
else:  # Apple MPS and others: asynchronous too, but timed here with CUDA events only
    print(f"{device}: no CUDA events to time the GPU with; width 16 only")

# %% [markdown]
# Now each width trained both ways, timed with `d2l_gpu.compare`: it alternates
# the two loops over 20 rounds, so that a slow moment of the machine falls on
# both, and judges the ratio of each round. Its verdict calls the loops equal
# when the median ratio lies within a tolerance of 1, and a difference clear only
# when the middle half of the round ratios lies beyond that band. We allow 25 %:
# on a machine shared with other programs, the same loop timed twice can differ by
# several percent, while the cost we look for on a GPU is far larger. PyTorch uses
# one CPU thread meanwhile, so that on a small shared machine the result does not
# depend on how soon a second core wakes up.

# %% tags=["nbval-ignore-output", "key-result"]
for width in widths:
    step = make_step(width)
    cmp = d2l_gpu.compare(
        functools.partial(train, step, False),
        functools.partial(train, step, True),
        labels=("one copy at the end", ".item() every step"),
        device=device,
        rounds=20,
        num_threads=1,
        tolerance=0.25,
    )
    host, gpu = per_step.get(width, (None, None))
    times = f" (per step: host {host * 1e6:.0f} us, GPU {gpu * 1e6:.0f} us)" if host else ""
    print(f"width {width} on {device}{times}:")
    print(cmp)

# %% [markdown]
# ## Reading the verdicts
#
# On a CPU, `.item()` only reads a number that is already in main memory, and
# the loop that keeps its log "on the device" does a little more each step (an
# indexed copy, one more call through PyTorch's dispatcher). Neither waits for
# anything, so the two loops should agree; the verdict says whether they did.
#
# On a GPU the cell prints two verdicts. At width 16 the host's work
# dominates and the loops should again come out close. At the matched width the
# GPU is busy for as long as Python queues, and only the log kept on the device
# lets the two work at once: `.item()` every step should then cost clearly more,
# approaching twice the time. Real training steps lie anywhere on this scale:
# a large model keeps the GPU busy far longer than Python takes to queue, and
# the wait then costs little; small models and batches on a fast GPU bring the
# two times close, where it costs most.
# [Exercise 3](08-exercises.ipynb) repeats the experiment with matrix products.

# %% [markdown]
# ## What this lesson showed
#
# - The section fits in three rules: we choose the device, every operand of
#   one operation shares it, and data moves rarely and in bulk.
# - Turning a loss into a Python number at every step stops Python from
#   queueing while the GPU works. It costs most, up to about twice the time,
#   when a step's host and GPU times are equal, and little when either
#   dominates; a log kept on the device and copied once avoids it.
# - A timing comparison means something only next to its spread; a CPU run
#   cannot show a cost that comes from waiting for a GPU.
#
# Next: [08 – Exercises](08-exercises.ipynb) (larger and smaller computations,
# saving parameters across devices, this logging experiment with matrix products,
# two GPUs at once), then [09 – Beyond one machine](09-beyond-one-machine.ipynb).
