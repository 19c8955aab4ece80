# %% [markdown]
# # Asynchrony and transfers: what waiting and moving data cost
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/04-asynchrony-and-transfers.ipynb)
#
# What a GPU printed for these lessons: [notebooks/gpu](../gpu/README.md).
#
# **What you will learn**
#
# - that a GPU works through a queue while Python runs ahead;
# - the book's side notes, measured;
# - what a wait at every step costs, and how to find hidden waits;
# - what pinned memory and `non_blocking` buy, cost and risk.
#
# **What you need**
#
# - [03 – Tensors and GPUs](03-tensors-and-gpus.ipynb); a GPU is optional. No GPU
#   has run this lesson's GPU branches yet.

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
# ## A GPU works behind Python's back
#
# When Python calls `torch.matmul` on a GPU tensor, PyTorch puts a *kernel* (a
# program for the GPU) into the GPU's queue and returns at once, like ordering
# coffee by phone: the result tensor exists at once, its values come later. The
# cell queues ten products and reads the clock when the loop returns and after
# `d2l_gpu.synchronize(device)` has emptied the queue. On a CPU each call
# computes before returning, so the readings agree; on a GPU the first is far
# smaller. So an error in a queued kernel also surfaces at a later call
# ([08](08-gpu-memory.ipynb)).

# %% tags=["nbval-ignore-output", "key-result"]
import time

device = d2l_gpu.try_gpu()
torch.set_num_threads(1)  # one CPU thread: steadier timings
n = 256 if device.type == "cpu" else 4096
a = torch.randn(n, n, device=device)
c = torch.empty_like(a)
for _ in range(3):  # warm-up
    torch.matmul(a, a, out=c)
d2l_gpu.synchronize(device)

start = time.perf_counter()
for _ in range(10):
    torch.matmul(a, a, out=c)
queued = time.perf_counter() - start  # Python is done
d2l_gpu.synchronize(device)
finished = time.perf_counter() - start  # the device is done too
print(f"10 products of {n}x{n} matrices on {device}:")
print(f"  clock read when the loop returned: {queued * 1e3:8.2f} ms")
print(f"  clock read after synchronizing:    {finished * 1e3:8.2f} ms")
if finished > 2 * queued:
    meaning = "the loop returned long before the device finished: the work was queued"
else:
    meaning = "the work was done inside each call: nothing was left in a queue"
print(f"  the second reading is {finished / queued:.1f}x the first: {meaning}")

# %% [markdown]
# ## Side notes, measured
#
# Each cell below times two pieces of code with `d2l_gpu.compare`
# ([09](09-timing-a-gpu.ipynb)) and prints a verdict.

# %% tags=["nbval-ignore-output", "key-result"]
host = torch.randn(1024, 1024)  # 4 MiB in main memory
on_device = host.to(device)
landing, out = torch.empty_like(on_device), torch.empty_like(on_device)
print(d2l_gpu.compare(
    lambda: torch.mul(on_device, 2, out=out),
    lambda: landing.copy_(host),
    labels=(f"x * 2 on {device}", f"copying 4 MiB to {device}"),
))
pieces = [torch.randn(1024) for _ in range(1024)]  # the same 4 MiB in 4 KiB pieces
landings = [torch.empty(1024, device=device) for _ in pieces]
print(d2l_gpu.compare(
    lambda: landing.copy_(host),
    lambda: [d.copy_(p) for d, p in zip(landings, pieces, strict=True)],
    labels=("one copy of 4 MiB", "1024 copies of 4 KiB"),
))

# %% [markdown]
# `x * 2` reads and writes as much memory as the copy moves, yet on a GPU the
# copy crosses the bus and takes many times as long; on a CPU both stay in main
# memory. The figure times one copy per size, 1 KiB to 64 MiB; on a CUDA GPU
# also from pinned memory, waiting for each copy and not.

# %% mystnb={"image": {"alt": "Two log-log line charts against copy size from 1 KiB to 64 MiB: time per copy in microseconds, flat for small copies then rising, and copy rate in GB/s with a dashed line at the fastest 64 MiB rate"}} tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt

sizes = [4**k * 1024 for k in range(9)]
ways = {"ordinary memory": (False, False)}  # (pinned, non_blocking)
if device.type == "cuda":
    ways |= {"pinned memory": (True, False), "pinned, non_blocking": (True, True)}


def copy(size, pinned, queued):
    source = torch.empty(size // 4, pin_memory=pinned)  # float32: 4 bytes
    landing = torch.empty(size // 4, device=device)
    return lambda: landing.copy_(source, non_blocking=queued)


fig, (left, right) = plt.subplots(1, 2, figsize=(6, 3.6), layout="constrained", dpi=200)
fastest = (0.0, "")  # the fastest 64 MiB rate, and whose it is
for way, (pinned, queued) in ways.items():
    times = [d2l_gpu.benchmark(copy(s, pinned, queued), device=device, min_run_time=0.05) for s in sizes]
    us = [t.median * 1e6 for t in times]
    us_spread = [[(t.median - t.q1) * 1e6 for t in times], [(t.q3 - t.median) * 1e6 for t in times]]
    rates = [s / t.median / 1e9 for s, t in zip(sizes, times, strict=True)]
    rate_spread = [
        [r - s / t.q3 / 1e9 for r, s, t in zip(rates, sizes, times, strict=True)],
        [s / t.q1 / 1e9 - r for r, s, t in zip(rates, sizes, times, strict=True)],
    ]
    label = f"from {way} to {device}" if device.type != "cpu" else "within main memory"
    left.errorbar(sizes, us, yerr=us_spread, fmt="o-", capsize=2, label=label)
    right.errorbar(sizes, rates, yerr=rate_spread, fmt="o-", capsize=2)
    fastest = max(fastest, (rates[-1], label))
    print(f"{label}: {us[0]:.3g} us per 1 KiB copy, {rates[-1]:.3g} GB/s at 64 MiB")
rate, label = fastest
right.axhline(rate, color="gray", linestyle="--", label=f"fastest at 64 MiB ({label}): {rate:.3g} GB/s")
for ax in (left, right):
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sizes[::2], ["1 KiB", "16 KiB", "256 KiB", "4 MiB", "64 MiB"], fontsize="small")
    ax.set_xlabel("transfer size (bytes)")
left.set_ylabel("time per copy (µs)")
right.set_ylabel("rate (GB/s)")
fig.legend(loc="outside lower center", fontsize="small", ncols=2)
plt.show()
plt.close(fig)

# %% [markdown]
# Small copies cost about a copy's fixed cost, so 1024 of them lose to one
# large one. On a CPU (one thread here) the rate rises while the data fit in
# a cache and falls in main memory; dashed is the fastest 64 MiB rate. On a CUDA
# GPU large copies should level off at the bus's limit, higher from pinned
# memory; at small sizes the `non_blocking` curve's gain is the skipped wait,
# not pinning.
#
# Reading values back waits too: `print(x)`, `x.item()`, `x.tolist()` and
# `x.cpu()` copy a GPU tensor to main memory after the work queued before it.
# On a CPU the cell below measures only the cost per call; on a GPU each
# `.item()` also waits and copies.

# %% tags=["nbval-ignore-output"]
values = torch.rand(256, device=device)
print(d2l_gpu.compare(
    lambda: values.tolist(),
    lambda: [v.item() for v in values],
    labels=("one .tolist()", "256 .item() calls"),
))

# %% [markdown]
# ## The logging mistake
#
# The book warns against turning each minibatch's loss into a Python number,
# blaming Python's global interpreter lock; but PyTorch releases that lock
# while it waits: the cost is the queue.
#
# Say a step costs the host H seconds (preparing data, launching kernels) and
# the GPU G seconds. On one CUDA stream a kernel starts once launched if the GPU
# is free, so host and GPU overlap *within* a step even when it ends in
# `.item()`. Without the wait, the host also queues step k + 1 while the GPU
# runs step k, and a step costs about max(H, G). The wait removes only this
# run-ahead across steps: a step then costs between max(H, G) and H + G (plus a
# round trip), reaching H + G when the step's GPU work must wait for all its
# host work, as when the host first prepares each batch.
#
# The cell builds such a step: the host draws a batch into pinned memory, then
# the GPU runs `depth` matrix products on it. On a CUDA GPU, `depth` grows
# until G is about H (`d2l_gpu.host_and_device_seconds` measures both).

# %% tags=["nbval-ignore-output", "key-result"]
pin = device.type == "cuda"
rows, width = (64, 256) if device.type == "cpu" else (256, 4096)
weight = torch.randn(width, width, device=device) / width**0.5


def make_step(depth):
    def step():
        batch = torch.randn(rows, width, pin_memory=pin)  # host work first
        x = batch.to(device, non_blocking=True)
        for _ in range(depth):  # then the GPU work
            x = x @ weight
        return x.square().mean()

    return step


def train(step, log_every_step, steps=10):
    losses = []
    for _ in range(steps):
        loss = step()
        losses.append(loss.item() if log_every_step else loss)  # .item() waits
    return losses if log_every_step else torch.stack(losses).tolist()  # one copy


depth = 4
if device.type == "cuda":
    host_s, gpu_s = d2l_gpu.host_and_device_seconds(make_step(depth), device, steps=10)
    for _ in range(2):  # until G is about H
        depth = min(64, max(1, round(depth * host_s / gpu_s)))
        host_s, gpu_s = d2l_gpu.host_and_device_seconds(make_step(depth), device, steps=10)
step = make_step(depth)
comparison = d2l_gpu.compare(
    lambda: train(step, False),
    lambda: train(step, True),
    labels=("log kept on the device", ".item() every step"),
)
print(comparison)
without, with_item = (m.median / 10 * 1e3 for m in (comparison.first, comparison.second))
print(f"per step: {without:.2f} ms without the wait, {with_item:.2f} ms with .item()")
if device.type == "cuda":
    h, g = host_s * 1e3, gpu_s * 1e3
    print(f"H = {h:.2f} ms on the host, G = {g:.2f} ms on the GPU ({depth} products)")
    print(f"max(H, G) = {max(h, g):.2f} ms, H + G = {h + g:.2f} ms")
elif device.type == "cpu":
    print("no queue on the CPU: host and device work take turns in both loops")
else:
    print(f"{device} has a queue too, but H and G are measured on CUDA GPUs only")

# %% [markdown]
# On a CUDA GPU, expect the two loops near max(H, G) and H + G; real steps lie
# in between.
#
# ## Finding hidden waits
#
# With `torch.cuda.set_sync_debug_mode("warn")`, PyTorch warns at most
# operations that make the host wait for a CUDA GPU. The cell prints which of
# some similar lines waited or, without CUDA, what PyTorch's source says.

# %% tags=["nbval-ignore-output"]
import warnings

x = torch.randn(1024, device=device)
batch = torch.randn(rows, width)
pinned = batch.pin_memory() if pin else batch
lines = {  # does it wait for a CUDA GPU?
    "x * 2": (lambda: x * 2, False),
    "x.sum().item()": (lambda: x.sum().item(), True),
    "x[x > 0]": (lambda: x[x > 0], True),  # only the GPU knows the result's size
    "batch.to(device)": (lambda: batch.to(device), True),
    "pinned.to(device, non_blocking=True)": (
        lambda: pinned.to(device, non_blocking=True),
        False,
    ),
}
if device.type == "cuda":
    torch.cuda.set_sync_debug_mode("warn")
    try:
        for line, (run, _) in lines.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                run()
            waited = any("synchronizing" in str(w.message) for w in caught)
            print(f"{line:>36}: {'waited' if waited else 'did not wait'}")
    finally:
        torch.cuda.set_sync_debug_mode("default")
else:
    print(f"set_sync_debug_mode needs CUDA, which {device} lacks.")
    print("On a CUDA GPU, by PyTorch's source:")
    for line, (_, waits) in lines.items():
        print(f"{line:>36}: {'waits' if waits else 'does not wait'}")

# %% [markdown]
# So a loop that copies each batch from ordinary memory waits at every step,
# even without `.item()`.
#
# ## Pinned memory and `non_blocking`
#
# A CUDA GPU copies from page-locked ("pinned") memory only. From ordinary
# memory the data goes through a pinned staging buffer and PyTorch waits; from
# memory pinned in advance, `non_blocking=True` only queues the copy. The first
# pin of a size is slow: it locks new pages, which the system cannot swap out;
# later pins reuse PyTorch's cached blocks but still copy the data once more.
# So pin a buffer once and reuse it, or let a `DataLoader` with
# `pin_memory=True` pin batches. Refilling a buffer before its queued copy has
# run sends the GPU the new data, a *race* (the outcome depends on which happens
# first). Alternating two buffers alone does not help a host that runs ahead:
# give each buffer its own event, recorded after its copy and waited on before
# its refill. The cell times pinning and copying, then sends eight batches, each
# copy queued behind GPU work, three ways.

# %% tags=["nbval-ignore-output", "key-result"]
batch = torch.randn(2048, 1024)  # 8 MiB in ordinary memory
landing = torch.empty(batch.shape, device=device)
if pin:
    timer = d2l_gpu.Timer(device)
    pinned = batch.pin_memory()  # the first pin of 8 MiB locks new pages
    print(f"first pin of 8 MiB: {timer.stop() * 1e3:.2f} ms")
    print(d2l_gpu.benchmark(lambda: batch.pin_memory(), label="later pins (cached blocks)"))
    print(d2l_gpu.compare(
        lambda: landing.copy_(pinned, non_blocking=True),
        lambda: landing.copy_(batch),
        labels=("a non_blocking copy from pinned memory", "a copy from ordinary memory"),
    ))
else:
    print(f"{device} is not a CUDA GPU: nothing pinned, no CUDA API called")


def send_batches(buffers, guarded):  # did all 8 batches arrive intact?
    staging = [torch.empty(batch.shape, pin_memory=pin) for _ in range(buffers)]
    copied = [torch.cuda.Event() if pin else None for _ in staging]  # one per buffer
    intact = torch.tensor(True, device=device)
    for k in range(8):
        i = k % buffers
        if guarded and pin:
            copied[i].synchronize()  # this buffer's last copy has run
        staging[i].fill_(k)  # refill it
        for _ in range(5):  # GPU work queued before the copy
            torch.matmul(a, a, out=c)
        landing.copy_(staging[i], non_blocking=pin)
        if pin:
            copied[i].record()
        intact &= (landing == k).all()  # no wait
    return intact.item()


for way, buffers, guarded in (
    ("one buffer", 1, False),
    ("two buffers, alternating", 2, False),
    ("two buffers, each with its event", 2, True),
):
    print(f"{way:>32}: 8 batches arrived intact: {send_batches(buffers, guarded)}")
if not pin:
    print(f"no queued copies on {device}: all intact; on a CUDA GPU the first two should print False")

# %% [markdown]
# A copy to the host with `non_blocking=True` races too: nothing makes the CPU
# wait before reading. The cell fills a host buffer with -1, queues twenty
# products and the copy back, and reads the last element before and after
# synchronizing: on a CUDA GPU or Apple's MPS the early read should find -1. A
# right early read proves nothing: a race can go either way.

# %% tags=["nbval-ignore-output", "key-result"]
ones = torch.ones(n, n, device=device)
product = torch.empty_like(ones)
result = torch.full((n, n), -1.0, pin_memory=pin)  # before any work
d2l_gpu.synchronize(device)  # start from an empty queue
for _ in range(20):
    torch.matmul(ones, ones, out=product)  # every element equals n
result.copy_(product, non_blocking=True)  # queued behind the products
too_early = result[-1, -1].item()  # a CPU tensor: this does not wait
d2l_gpu.synchronize(device)
print(f"last element read before synchronizing: {too_early} (expected {float(n)}, old value -1.0)")
print(f"last element read after synchronizing:  {result[-1, -1].item()}")
if too_early != n:
    print("the early read was wrong: the copy had not landed yet")
elif device.type == "cpu":
    print("the early read was right: on the CPU nothing is queued, so there was no race")
else:
    print("the early read came out right this time: the race went the lucky way, proving nothing")

# %% [markdown]
# ## What this lesson showed
#
# - A GPU works through a queue while Python runs ahead.
# - On a GPU a transfer costs more than simple arithmetic, and many small
#   copies more than one large one.
# - A wait at every step removes the run-ahead across steps; keep logs on the
#   device. `set_sync_debug_mode` finds hidden waits.
# - A non-blocking copy races: refill its source after an event, read its
#   result after synchronizing.
#
# Next: [05 – Neural networks and GPUs](05-neural-networks-and-gpus.ipynb) puts
# a whole model on a device.
