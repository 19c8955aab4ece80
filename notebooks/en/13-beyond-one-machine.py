# %% [markdown]
# # Beyond one machine: processes, devices and `torch.distributed`
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/13-beyond-one-machine.ipynb)
#
# What a GPU printed for these lessons: [notebooks/gpu](../gpu/README.md).
#
# *Beyond the book: this lesson goes past the chapter.*
#
# **What you will learn**
#
# - how `torchrun` starts one process per device and tells each process who it is;
# - how each process picks its own device, and how all of them agree on a
#   communication backend (`nccl` or `gloo`);
# - why a collective such as `all_reduce` costs far more than the arithmetic it
#   replaces, above all for small messages;
# - what happens to the others when one process fails.
#
# **What you need**
#
# - [03 – Tensors and GPUs](03-tensors-and-gpus.ipynb). A GPU is optional: with
#   none, every process computes on the CPU and talks over TCP with `gloo`.

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
# ## One process per device
#
# In [03](03-tensors-and-gpus.ipynb) one process moved tensors between devices
# itself. Training on two or more GPUs runs one process per GPU instead:
# PyTorch recommends `DistributedDataParallel` over a single process driving
# them all (`DataParallel`), even on one machine; across machines there is no
# other way. PyTorch's launcher `torchrun` starts the processes and hands each
# a few variables:
#
# - `RANK`: this process's number in the whole job, `0 ... WORLD_SIZE - 1`;
# - `WORLD_SIZE`: how many processes there are in total;
# - `LOCAL_RANK`: its number on this machine, which says which GPU it should take;
# - `MASTER_ADDR`, `MASTER_PORT`: where the processes meet to connect.
#
# The demo is a plain program, `all_reduce_demo.py`, in the `scripts` folder
# beside the notebooks. Run without `torchrun`, it says how to launch it and
# exits with status 2.

# %%
import os
import subprocess
import tempfile
from pathlib import Path

from d2l_gpu import distributed

# A script finds the demo beside its own file; a notebook runs in its own folder.
here = Path(__file__).parent if "__file__" in globals() else Path.cwd()
DEMO = (here / ".." / "scripts" / "all_reduce_demo.py").resolve()
if "google.colab" in sys.modules and not DEMO.is_file():  # Colab opened this notebook alone
    clone = Path("d2l-gpu")
    if not clone.is_dir():  # a second run reuses the first one's clone
        url = "https://github.com/d2l-gpu/d2l-gpu"
        subprocess.run(["git", "clone", "--quiet", "--depth", "1", url, str(clone)], check=True)
    DEMO = (clone / "notebooks" / "scripts" / "all_reduce_demo.py").resolve()

plain = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, timeout=60)
print("exit status:", plain.returncode)
print(plain.stderr.splitlines()[0])

# %% [markdown]
# ## Every process owns a device
#
# `distributed.rank_device(LOCAL_RANK)` gives each process of a machine its own
# GPU: local rank 0 the first, 1 the second, and so on, cycling when there are
# more processes than GPUs. (A launcher that sets `CUDA_VISIBLE_DEVICES` per
# process leaves each one a single GPU, `cuda:0`.) With no GPU, every process
# computes on the CPU. Local ranks 0 to 3 here get:

# %%
print([str(distributed.rank_device(local_rank)) for local_rank in range(4)])

# %% [markdown]
# The processes must also agree on how to talk. `nccl` moves data between NVIDIA
# GPUs by the best path the machine offers: over NVLink or PCIe where the cards
# can reach each other's memory, through the host's memory where they cannot
# (common on consumer and cloud cards), and over the network between machines.
# It needs a GPU *of its own* in every process: two processes on one GPU stop
# with "Duplicate GPU detected". `gloo` works everywhere and takes GPU tensors
# too for the common collectives, copying them through the CPU. A process alone
# cannot see whether another uses the same GPU, so `process_group()` first lets
# the processes swap a name for their device that means the same in all of them
# (the GPU's UUID, or `cpu`), and each makes the same choice from the same list:

# %%
examples = {
    "a GPU per process": ["cuda GPU-1111", "cuda GPU-2222"],
    "two processes, one GPU": ["cuda GPU-1111", "cuda GPU-1111"],
    "a process without GPU": ["cuda GPU-1111", "cpu"],
}
for case, identities in examples.items():
    print(f"{case:<24} -> {distributed.choose_backend(identities)}")
try:  # asking for nccl where it cannot work is refused before any data moves
    distributed.choose_backend(["cuda GPU-1111", "cuda GPU-1111"], "nccl")
except RuntimeError as e:
    print(f"{type(e).__name__}: {e}")


# %% [markdown]
# ## Launching the job from a notebook
#
# A cell can start `torchrun` (the same program as `python -m
# torch.distributed.run`) as a subprocess with this notebook's Python.
# `--standalone --local-addr 127.0.0.1` keeps a one-machine job on the loopback
# interface and a free port. The function below gives each job a temporary
# folder for `torchrun`'s logs and one CPU thread per process. A job past its
# time limit is ended, its processes with it.

# %%
def torchrun(*args, timeout=60, **variables):
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "TMPDIR": folder, "OMP_NUM_THREADS": "1", **variables}
        command = [sys.executable, "-m", "torch.distributed.run"]
        command += ["--standalone", "--local-addr", "127.0.0.1", *map(str, args)]
        job = subprocess.Popen(
            command, cwd=folder, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            out, err = job.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            job.terminate()  # torchrun passes SIGTERM on to its processes
            out, err = job.communicate()
    return job.returncode, out, err


# %% [markdown]
# Two processes on this machine, timing square float32 matrices with sides 8,
# 64, 256 and 1024 (256 bytes to 4 MiB). The job asks for `gloo`, so that every
# machine times the same backend (exercise 3 sets `nccl` against it). Each
# process prints its rank, device and backend; rank 0 then prints the timings.

# %% tags=["nbval-ignore-output"]
job = ("--nproc-per-node", 2, DEMO, "--backend", "gloo", "--sizes", 8, 64, 256, 1024)
code, timings, err = torchrun(*job)
print(timings if code == 0 else err)

# %% [markdown]
# The sums do not depend on the hardware: rank `r` sent
# `[1, 2, 3, 4] * (r + 1)`, so with two processes every entry is 3 times that.

# %%
print(*sorted(line for line in timings.splitlines() if "all_reduce(sum)" in line), sep="\n")

# %% [markdown]
# ## Communication costs more than computation
#
# Rank 0 timed the `all_reduce` of one matrix (a sum across two processes)
# against the local sum `x + y` and the product `x @ x`. `d2l_gpu.benchmark`
# picks its own call count, and processes that disagree would wait forever
# inside a collective; so the demo makes a fixed count of calls, each after a
# barrier, and waits for the device before reading the clock. The sizes
# take turns, one call each a round (ten rounds to warm up, twenty timed), so a
# busy spell on the machine slows them alike. Each `all_reduce` thus pays its
# whole latency, while the local operations, timed in blocks, may overlap.
#
# For 256 bytes the `all_reduce` costs many times the local sum: latency
# (waking the other process, a round trip through the operating system) paid
# however little data there is. A product's work grows with the cube of the
# side, its data with the square, so at 4 MiB the product may take longer: on
# a CPU it can. A GPU computes it in microseconds while `gloo` still copies
# through the host, so there the communication takes far longer. `nccl` is
# faster but also pays a fixed cost per call; no run of these lessons has
# measured it (exercise 3 does, on two GPUs).
#
# The figure draws each size's fastest `all_reduce` of the twenty (waiting
# for a free core only adds time).

# %% mystnb={"image": {"alt": "Log-log line chart of time per call in microseconds against message size from 256 bytes to 4 MiB: the all_reduce across two processes, nearly flat for small messages and above the local x + y at every size, and the local x @ x, which rises fastest"}} tags=["nbval-ignore-output"]
import re

import matplotlib.pyplot as plt

US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}  # the units Measurement prints, in µs
sizes = [int(b.replace(",", "")) for b in re.findall(r"\(([\d,]+) bytes\)", timings)]
reduce_us = [float(t.replace(",", "")) for t in re.findall(r"all_reduce: ([\d,.]+) us", timings)]


def medians_us(op):  # a local operation's benchmark medians, in µs
    found = re.findall(rf"{re.escape(op)}: ([\d,.]+) (ns|us|ms|s) median", timings)
    return [float(t.replace(",", "")) * US[unit] for t, unit in found]


setup = re.search(r"^timing on rank 0 \((.*)\):$", timings, re.M)
fig, ax = plt.subplots(figsize=(6, 3.6), dpi=200)
ax.loglog(sizes, reduce_us, "o-", label="all_reduce (fastest of 20 calls)")
for op, marker in (("x + y", "s-"), ("x @ x", "^:")):
    ax.loglog(sizes, medians_us(op), marker, label=f"local {op} (benchmark median)")
ax.set_xlabel("message size (bytes)")
ax.set_ylabel("time per call (µs)")
ax.set_title(f"rank 0: {setup.group(1) if setup else 'the job failed'}", fontsize=9)
ax.legend()
plt.show()
plt.close(fig)

# %% [markdown]
# The `all_reduce` line starts nearly flat (its fixed cost outweighs the
# bytes) and stays above the local sum at every size.
#
# Training code does not call `all_reduce` itself. It wraps the model in
# `torch.nn.parallel.DistributedDataParallel` (DDP), one process per GPU as here.
# During `backward`, DDP packs the gradients into buckets of up to 25 MiB
# (`bucket_cap_mb`) and all-reduces each bucket as soon as its gradients are
# ready, while the rest of `backward` computes; the first bucket holds at most
# 1 MiB, so that communication starts early. So the fixed cost is paid per
# bucket, not per tensor. The cell below builds DDP in a one-process job (an
# in-memory meeting point instead of `torchrun`) so that it runs here:

# %%
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

device = distributed.rank_device(0)  # what local rank 0 would take
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
try:
    model = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    ddp(torch.randn(64, 1024, device=device)).sum().backward()  # gradients all-reduced here
    grads = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters())
    print(f"DDP on {device}, {dist.get_world_size()} process, backend {dist.get_backend()}")
    print(f"gradient buckets of up to {ddp.bucket_bytes_cap / 2**20:.0f} MiB")
    print(f"this model's gradients: {grads / 2**20:.1f} MiB per step")
finally:
    dist.destroy_process_group()

# %% [markdown]
# ## Two servers
#
# On two real servers you run the *same* command on each one; `HOST:PORT` is an
# address of the first server that the second can reach, and `join_timeout`
# bounds how long a server waits for the other (the default is 600 s):
#
# ```bash
# torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d \
#     --rdzv-id my-job --rdzv-endpoint HOST:29500 --rdzv-conf join_timeout=60 \
#     all_reduce_demo.py
# ```
#
# The `c10d` rendezvous waits until both servers have joined, then numbers them
# by sorting their descriptions (the address each gives, then its `torchrun`'s
# process id), not by arrival; processes are then numbered server by server.
# Try it on one machine from two terminals, with `127.0.0.1` as `HOST` and
# `--local-addr 127.0.0.1`.
#
# ## When a process fails
#
# If one process raises, the others would wait for it forever inside their next
# collective. `torchrun` stops the rest as soon as one exits with an error, and
# prints a summary of the failures. The demo's `--fail-rank 1` makes rank 1
# raise before the first `all_reduce`:

# %%
code, out, err = torchrun("--nproc-per-node", 2, DEMO, "--fail-rank", 1, "--sizes")
print("torchrun's exit status:", code)
failed = [line.split(": ", 1)[1] for line in err.splitlines() if "RuntimeError: rank" in line]
print(failed[0] if failed else "no rank's error found in torchrun's output")
print("rank 0 printed a sum:", "all_reduce(sum)" in out)


# %% [markdown]
# ## Exercises, answered where this machine allows
#
# **1.** Run the demo with 1, 2 and 4 processes (`--nproc-per-node`), one CPU
# thread each. How do the times of the smallest and of the 4 MiB message change
# with the number of processes? Two ran above; one is timed here, alone in a
# group as in the DDP cell (with no partner to disagree, `benchmark` may pick
# the count); four where the cores allow one each. All use `gloo`.

# %% tags=["nbval-ignore-output"]
def all_reduce_us(report):  # {bytes: fastest all_reduce in us}, from rank 0's lines
    found = re.findall(r"\(([\d,]+) bytes\):\n  all_reduce: ([\d,.]+) us", report)
    return {int(b.replace(",", "")): float(t.replace(",", "")) for b, t in found}


alone = {}
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
try:
    for n in (8, 1024):
        x = torch.rand(n, n, device=device)
        m = d2l_gpu.benchmark(lambda x=x: dist.all_reduce(x), device=device)
        alone[4 * n * n] = m.median * 1e6
finally:
    dist.destroy_process_group()
cores = os.cpu_count() or 1
us_by_count = {1: alone, 2: all_reduce_us(timings)}
if cores >= 4:
    job = ("--nproc-per-node", 4, DEMO, "--backend", "gloo", "--sizes", 8, 1024)
    us_by_count[4] = all_reduce_us(torchrun(*job)[1])
for count in (1, 2, 4):
    if count not in us_by_count:
        print(f"{count} processes: not run, {cores} CPU cores would be shared")
        continue
    us = {b: t for b, t in us_by_count[count].items() if b in (256, 4 * 2**20)}
    times = ", ".join(f"{t:,.1f} us for {b:,} bytes" for b, t in us.items())
    print(f"{count} process(es): all_reduce {times or 'not timed (the job failed)'}")

# %% [markdown]
# One process has no partner: its `all_reduce` costs little at any size. From
# two on, each call waits for the others, and more processes mean more to hear
# from.
#
# **2.** From which size on does the `all_reduce` grow in proportion to the
# bytes? The cell reads the job above: each step's growth in time against
# bytes, and a fixed cost plus bytes over a rate. The fixed cost is the lower
# time of the two smallest messages (a disturbance only adds time); the rate
# comes from the largest.

# %% tags=["nbval-ignore-output"]
from itertools import pairwise

fixed = min(reduce_us[:2], default=0)  # the smallest messages: nearly all fixed cost
if len(reduce_us) >= 2 and reduce_us[-1] > fixed:
    for (b0, t0), (b1, t1) in pairwise(zip(sizes, reduce_us, strict=True)):
        print(f"{b0:>9,} -> {b1:>9,} bytes: {b1 / b0:3.0f}x the bytes, {t1 / t0:5.1f}x the time")
    rate = sizes[-1] / (reduce_us[-1] - fixed)  # bytes per us, past the fixed cost
    print(f"about {fixed:,.0f} us fixed, then {rate / 1e3:.2f} GB/s;")
    print(f"the bytes cost as much as the fixed part from about {fixed * rate:,.0f} bytes on")
    if any(t1 < 0.75 * t0 for t0, t1 in pairwise(reduce_us)):
        print("a larger message took much less time: something else ran meanwhile; rerun")
else:
    print("nothing to fit: the job above failed, or its all_reduce did not grow")

# %% [markdown]
# Below that size the fixed cost rules and the time barely moves; above it the
# bytes take over. Hence DDP's large buckets.
#
# **3.** With two GPUs, compare `--backend nccl` with `gloo`, and with
# `NCCL_DEBUG=INFO` set, find how NCCL moves data between the cards: its log
# names the transport after "via": `P2P` (card to card, over NVLink or PCIe
# alike), `SHM` (through host memory) or `NET` (a network). Which link P2P
# takes, `nvidia-smi topo -m` shows (`NV#` for NVLink). The cell needs two
# CUDA GPUs; no GPU has run it yet.

# %% tags=["nbval-ignore-output"]
gpus = torch.cuda.device_count()
if gpus >= 2:
    for backend in ("nccl", "gloo"):
        args = ("--nproc-per-node", 2, DEMO, "--backend", backend, "--sizes", 8, 1024)
        code, report, err = torchrun(*args, NCCL_DEBUG="INFO")
        times = ", ".join(f"{t:,.1f} us for {b:,} bytes" for b, t in all_reduce_us(report).items())
        print(f"{backend}: all_reduce {times or 'not timed (the job failed)'}")
        if backend == "nccl":
            paths = sorted(set(re.findall(r" via (\S+)", report + err)))
            print("NCCL's paths:", ", ".join(paths) or "none in its log")
else:
    print(f"{gpus} CUDA GPU(s): exercise 3 needs two, so nothing ran here.")

# %% [markdown]
# ## What this lesson showed
#
# - `torchrun` starts one process per device and tells each its `RANK`,
#   `WORLD_SIZE` and `LOCAL_RANK`; from two GPUs on, that is how to train.
# - Every process owns a device, and the tensors it sends must already be there.
# - The backend must suit every process: `nccl` needs a GPU of its own in each,
#   which the processes can only find out together; `gloo` runs anywhere.
# - A collective costs much more than the arithmetic it replaces, and small
#   messages pay mostly for latency; DDP therefore sends gradients in large buckets.
# - When one process fails, `torchrun` ends the others instead of leaving them
#   waiting.
#
# Next: back to the [index](../README.md).
