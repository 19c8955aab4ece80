# %% [markdown]
# # Timing a GPU: clocks that wait, and one rule for comparing
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/09-timing-a-gpu.ipynb)
#
# What a GPU printed for these lessons: [notebooks/gpu](../gpu/README.md).
#
# *Beyond the book: this lesson goes past the chapter.*
#
# **What you will learn**
#
# - why a plain clock lies on a GPU: it measures the launch, not the work;
# - `d2l_gpu.Timer`, the book's timer, made to wait for the device, and
#   `d2l_gpu.benchmark`, which warms up and reports a median and its spread;
# - what CUDA events measure, including what they do *not* leave out;
# - the one rule `d2l_gpu.compare` uses in every lesson, and its band.
#
# **What you need**
#
# - [04 – Asynchrony and transfers](04-asynchrony-and-transfers.ipynb), which
#   shows that a GPU works through a queue while Python runs ahead. A GPU is
#   optional: on a CPU every cell runs, and the text says what a GPU shows.

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
# ## A clock must wait: `Timer`
#
# [04](04-asynchrony-and-transfers.ipynb) showed that on a GPU a loop of
# products returns long before the device has done them. A clock read right
# after the loop therefore measures how long it took to *launch* the work, not
# to do it. The book times its experiments with a small `Timer` class
# (`start`, `stop`, `avg`, `sum`, `cumsum`) that reads the clock without
# waiting, so on a GPU it times launches. `d2l_gpu.Timer` keeps the book's
# names but waits for the device before every reading.
#
# The cell times ten products both ways, five times over. Ten products before
# any clock starts are a *warm-up*: the first calls pay one-off costs that later
# calls do not. For a product on a CUDA GPU these are setting up the cuBLAS
# library (its handle and working memory) and loading the kernel's code onto
# the card, the lazy loading of [08](08-gpu-memory.ipynb).

# %% tags=["nbval-ignore-output"]
import time

device = d2l_gpu.try_gpu()
torch.set_num_threads(1)  # one CPU thread, as in 04: steadier timings on a busy machine
n = 256 if device.type == "cpu" else 4096  # a GPU needs large work to stay busy
a = torch.randn(n, n, device=device)
c = torch.empty_like(a)


def ten_products():
    for _ in range(10):
        torch.matmul(a, a, out=c)


ten_products()  # warm-up
plain, timer = [], d2l_gpu.Timer(device)
for _ in range(5):
    d2l_gpu.synchronize(device)
    start = time.perf_counter()
    ten_products()
    plain.append(time.perf_counter() - start)  # Python is done; the device may not be
    timer.start()  # waits for the device, then starts
    ten_products()
    timer.stop()  # waits for the device, then reads the clock
print(f"10 products of {n}x{n} on {device}, five readings (ms) each way:")
for what, times in (
    ("a clock that does not wait", plain),
    ("d2l_gpu.Timer, which waits", timer.times),
):
    print(f"  {what}: {', '.join(f'{t * 1e3:.2f}' for t in times)}")
print(f"mean of the Timer readings: {timer.avg() * 1e3:.2f} ms")

# %% [markdown]
# The figure puts the two sets of readings side by side on a log axis: look at
# how far apart they sit.

# %% mystnb={"image": {"alt": "Strip chart on a log axis: the time of ten matrix products in milliseconds, five readings of a clock that does not wait beside five of d2l_gpu.Timer, which waits. On a CPU the strips overlap; on a GPU the first sits far below."}} tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt
from matplotlib import ticker

fig, ax = plt.subplots(figsize=(6, 3.6), dpi=200)
for i, times in enumerate((plain, timer.times)):
    spread = [i + 0.04 * (k - 2) for k in range(len(times))]  # side by side: five dots, not fewer
    ax.plot(spread, [t * 1e3 for t in times], "o", alpha=0.5)
ax.set_xticks([0, 1], ["does not wait (perf_counter)", "waits (d2l_gpu.Timer)"])
ax.set_xlim(-0.5, 1.5)
ax.set_yscale("log")
ax.yaxis.set_major_locator(ticker.LogLocator(subs=(1, 2, 3, 5)))
ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))  # 0.5, 1, 2 rather than powers of ten
ax.yaxis.set_minor_formatter(ticker.NullFormatter())
readings = [t * 1e3 for t in plain + timer.times]
ax.set_ylim(min(readings) / 2, max(readings) * 2)  # a margin, so agreeing sets look alike
ax.set_xlabel("clock")
ax.set_ylabel("time of ten products (ms)")
ax.set_title(f"10 products of {n}x{n} on {device}", fontsize=9)
plt.show()
plt.close(fig)

# %% [markdown]
# Where the two sets overlap, each product was done inside its call, as on a
# CPU. Where the first sits far below, as on a GPU, Python had only queued the
# work: that clock timed the launches.
#
# ## `benchmark()`: warm-up, blocks, a median and its spread
#
# The five `Timer` readings differ. A single reading can land on a moment when
# another program holds the CPU, or when the GPU is still raising its clock
# speed. `d2l_gpu.benchmark` is built on PyTorch's own instrument,
# `torch.utils.benchmark.Timer`, and does what a careful person would do by hand:
#
# - it calls the function a few times first (warm-up);
# - it groups calls into *blocks*, large enough that reading the clock costs
#   little next to a block, and waits for the device at each end of a block;
# - it times at least 10 blocks and reports the **median** time per call, which
#   one slow block cannot drag, and the **interquartile range** (IQR): the
#   width of the middle half of the blocks, from the first quartile (q1) to the
#   third (q3).

# %% tags=["nbval-ignore-output"]
product = d2l_gpu.benchmark(lambda: torch.matmul(a, a, out=c), device=device, label="x @ x")
print(product)
print(f"middle half of the blocks: {product.q1 * 1e3:.3f} to {product.q3 * 1e3:.3f} ms per call")
blocks = product.times
print(
    f"{len(blocks)} blocks: mean {sum(blocks) / len(blocks) * 1e3:.3f} ms per call,"
    f" the slowest {max(blocks) * 1e3:.3f} ms"
)

# %% [markdown]
# The mean of the blocks is printed beside the median. One block several times
# slower than the rest (another program taking the CPU, Python pausing to
# collect garbage) would drag the mean with it and hardly move the median:
# that is why the lessons report a median.
#
# ## CUDA events: the GPU's own timeline
#
# A CUDA GPU can also time itself. A `torch.cuda.Event` is a marker placed in
# the queue; when the GPU reaches it, it notes the time. `elapsed_time` gives
# the milliseconds between two markers *on the GPU's timeline*. It is tempting
# to read that as "GPU time without Python's overhead", but that is not what it
# is: if the GPU sat idle between the markers, waiting for Python to launch the
# next kernel, the idle gap is counted too.
#
# The cell below shows both cases with 200 tiny kernels (`small.mul_(1.0)`,
# each far shorter than its launch):
#
# - *the GPU idle at the first marker*: it runs each kernel as soon as Python
#   launches it and then waits for the next. Events read about what a
#   synchronized host clock reads, the launch loop's time.
# - *the GPU busy first*: three large products are queued before the first
#   marker, so all 200 launches are in the queue before the GPU reaches it.
#   Now the events measure the kernels back to back, without gaps: much less.
#
# Around large products, as in the first line, events and a waiting host clock
# nearly agree, because the GPU never runs dry. No GPU has run this cell yet.

# %% tags=["nbval-ignore-output", "key-result"]
if device.type == "cuda":
    stream = torch.cuda.current_stream(device)  # the queue the kernels go to
    small = torch.ones(256, device=device)

    def timed_on_gpu(work, head_start):
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        d2l_gpu.synchronize(device)
        for _ in range(head_start):
            torch.matmul(a, a, out=c)  # keeps the GPU busy while Python launches
        start = time.perf_counter()
        begin.record(stream)
        work()
        end.record(stream)
        end.synchronize()  # wait until the GPU has passed the second marker
        return begin.elapsed_time(end), (time.perf_counter() - start) * 1e3

    def tiny_kernels():
        for _ in range(200):
            small.mul_(1.0)

    for what, work, head_start in (
        ("10 large products, GPU idle at start", ten_products, 0),
        ("200 tiny kernels, GPU idle at start", tiny_kernels, 0),
        ("200 tiny kernels, GPU busy first", tiny_kernels, 3),
    ):
        timed_on_gpu(work, head_start)  # warm-up
        gpu_ms, host_ms = timed_on_gpu(work, head_start)
        print(f"{what}: events {gpu_ms:.3f} ms, host clock {host_ms:.3f} ms")
else:
    print(f"CUDA events need a CUDA GPU; on {device} nothing is queued, and a clock that")
    print("waits (Timer, benchmark) measures the work itself.")

# %% [markdown]
# On the last line the host clock also waited for the three products, so it
# is the larger one; the events cover only the tiny kernels. So events measure
# the work alone only when the queue is kept full. `d2l_gpu.benchmark` and
# `compare` use a waiting host clock instead, which counts what a user waits
# for: launches, gaps and the work.
#
# ## `compare()`: one rule for "which takes longer"
#
# Two medians measured one after the other can differ because the machine got
# busier in between. `d2l_gpu.compare(first, second)` avoids that: it times the
# two in alternating *rounds* (first then second, then second then first, and
# so on, 10 rounds), one block of each per round, and takes the ratio
# second / first in every round. A slow moment of the machine then falls on
# both sides of a round, and mostly cancels in its ratio.
#
# It then applies one rule, with one *band*, a factor of **1.25**:
#
# - the two **agree** when the median round ratio lies between 1/1.25 (0.8)
#   and 1.25;
# - one is **clearly** slower (or faster) only when the middle half of the
#   round ratios (q1 to q3) lies beyond the band;
# - anything in between is **no clear difference**.
#
# A factor, not a percentage, because the rule should not depend on which side
# is called first: "1.25x as long" one way is "0.8x" the other. And 1.25,
# because a smaller gap seldom changes how you write the code, while timings on
# a shared machine drift by more than a few percent. Every lesson uses this
# default and prints the sentence `compare` returns; this is the only place the
# band is discussed.
#
# The cell compares `x * 2` with `x + x` (the same memory traffic, so they
# should agree), then `x * 2` on four times the data, which should clearly take
# longer. Below each sentence it prints the round ratios' median and middle
# half next to the band.

# %% tags=["nbval-ignore-output"]
x = torch.randn(2**22, device=device)  # 16 MiB of float32
y = torch.empty_like(x)
big = torch.randn(2**24, device=device)  # four times as much
big_out = torch.empty_like(big)


def times_two():
    torch.mul(x, 2, out=y)


def plus_itself():
    torch.add(x, x, out=y)


def times_two_big():
    torch.mul(big, 2, out=big_out)


for first, second, labels in (
    (times_two, plus_itself, ("x * 2", "x + x")),
    (times_two, times_two_big, ("x * 2", "x * 2 on 4x the data")),
):
    comparison = d2l_gpu.compare(first, second, labels=labels, device=device)
    print(comparison)
    low, high = 1 / comparison.band, comparison.band
    print(
        f"  round ratios: median {comparison.ratio:.2f}, middle half"
        f" {comparison.ratio_q1:.2f} to {comparison.ratio_q3:.2f}; band {low:.2f} to {high:.2f}"
    )

# %% [markdown]
# The middle half is what decides "clearly": one lucky round cannot produce a
# verdict, and one unlucky round cannot spoil one.
#
# Four times the data can take more than four times as long. A CPU keeps
# recently used data in its cache: 16 MiB read and 16 MiB written may partly
# stay there between calls, 64 MiB cannot. A large GPU has such a cache too
# (50 MB of L2 on an H100), so a rate measured on data that fit in it can beat
# the datasheet's memory bandwidth.

# %% [markdown]
# ## What this lesson showed
#
# - A clock that does not wait for a GPU measures the launch. `d2l_gpu.Timer`
#   keeps the book's names and waits for the device at every reading.
# - `d2l_gpu.benchmark` warms up, times at least 10 blocks and reports the
#   median per call with its interquartile range.
# - CUDA events time the GPU's timeline between two markers, idle gaps
#   included; they measure the work alone only when the queue stays full.
# - `d2l_gpu.compare` times two calls in alternating rounds and uses one band,
#   a factor of 1.25: agree within 0.8 to 1.25, "clearly" only when the middle
#   half of the round ratios lies beyond it.
#
# Next: [10 – The profiler and the meta device](10-profiler-and-meta.ipynb)
# shows where a step's time goes, kernel by kernel.
