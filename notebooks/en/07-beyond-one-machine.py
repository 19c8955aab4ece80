# %% [markdown]
# # Beyond one machine: processes, devices and `torch.distributed`
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/07-beyond-one-machine.ipynb)
#
# **What you will learn**
#
# - how `torchrun` starts one process per device and tells each process who it is;
# - how `d2l_gpu.distributed` gives each process its own device and picks the
#   communication backend (`nccl` or `gloo`) that fits all of them;
# - how to run the same job as two "servers", here two launches on 127.0.0.1;
# - why a collective such as `all_reduce` costs far more than the arithmetic it
#   replaces, above all for small messages.
#
# **What you need**
#
# - [03 – Tensors and GPUs](03-tensors-and-gpus.ipynb); a GPU is optional: with
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
print("devices the helpers will use:", d2l_gpu.try_all_gpus())
if d2l_gpu.num_gpus() == 0:
    print("No GPU found: every cell still runs on the CPU; the text says what a GPU shows.")

# %% [markdown]
# ## One process per device
#
# Inside one Python process we moved tensors between `cuda:0` and `cuda:1`
# ourselves. Past a handful of GPUs, and certainly past one server, training
# runs as several processes instead: one per GPU, possibly on different
# machines, each with its own memory. PyTorch's launcher `torchrun` starts
# them and hands every process a few environment variables:
#
# - `RANK`: this process's number in the whole job, `0 ... WORLD_SIZE - 1`;
# - `WORLD_SIZE`: how many processes there are in total;
# - `LOCAL_RANK`: its number on this machine, which says which GPU it should take;
# - `MASTER_ADDR`, `MASTER_PORT`: where the processes meet to connect.
#
# The demo in `d2l_gpu.distributed` reads them. This notebook's kernel was not
# started by `torchrun`, so it has no place in a job, and the demo refuses to
# start (instead of waiting forever for partners) and prints how to launch it:

# %%
from d2l_gpu import distributed

print("inside torchrun:", distributed.rank_env() is not None)

# %% tags=["nbval-ignore-output"]
print(distributed.launch_hint())

# %% [markdown]
# ## Lesson 1: every process owns a device
#
# Each process takes the `LOCAL_RANK`-th GPU of its machine, through
# `d2l_gpu.try_gpu`, or the CPU when there is no such GPU. On this CPU-only
# machine every local rank gets the CPU; on a server with four GPUs, local
# ranks 0 to 3 would get `cuda:0` to `cuda:3` and a fifth process the CPU.

# %%
print([str(distributed.rank_device(local_rank)) for local_rank in range(4)])

# %% [markdown]
# The processes must also agree on how to talk. `nccl` moves data directly
# between NVIDIA GPUs (over NVLink or the network) and needs a CUDA device in
# every process; `gloo` works everywhere, CPU tensors included. The demo's
# ranks first swap their device types through `torchrun`'s meeting point, so
# they all make the same choice: ranks that chose different backends would wait
# for each other forever.

# %%
for types in (["cuda", "cuda"], ["cuda", "cpu"], ["cpu", "cpu"]):
    print(types, "->", distributed.choose_backend(types))
print(["cuda", "cuda"], "asking for gloo ->", distributed.choose_backend(["cuda", "cuda"], "gloo"))

# %% [markdown]
# Asking for `nccl` where a rank has no GPU is refused with a message that
# names the rank and what would work instead:

# %% tags=["raises-exception"]
distributed.choose_backend(["cuda", "cpu"], "nccl")

# %% [markdown]
# ## Lesson 2: data on the right device before an operation
#
# A collective is an operation like any other: every process passes a tensor
# on its own device. `all_reduce` adds up the tensors of all processes and
# leaves the sum in each of them. The demo makes its tensor directly on the
# rank's device, then checks the result against the sum it expects (with
# `nccl`, a tensor left on the CPU would be refused, just as `x + y` across
# devices is in one process):

# %%
import inspect

print(inspect.getsource(distributed.check_all_reduce).rstrip())

# %% [markdown]
# ## Launching the job from a notebook
#
# `torchrun` is a command-line program (`python -m torch.distributed.run` is
# the same thing), so a cell starts it as a subprocess with this notebook's
# Python, in a temporary folder, with a time limit: a job that waits for a
# partner that never comes fails here instead of hanging the notebook. The
# ranks print to the same terminal in whatever order they get there, so the
# notebook sorts their lines before printing them.

# %%
import os
import socket
import subprocess
import tempfile

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
JOB_ENV = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARS}
workdir = tempfile.gettempdir()  # torchrun writes nothing there; never the repository


def start(*args):
    """Start `torchrun ARGS` in the background; its output is collected by finish()."""
    return subprocess.Popen(
        [*TORCHRUN, *args],
        env=JOB_ENV,
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(job, timeout=60):
    """Wait for a job; return its standard output, or raise with its errors."""
    try:
        out, err = job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        job.terminate()  # torchrun stops its worker processes on SIGTERM
        out, err = job.communicate()
        raise RuntimeError(f"torchrun still running after {timeout} s:\n{err}") from None
    if job.returncode != 0:
        raise RuntimeError(f"torchrun exited with {job.returncode}:\n{err}")
    return out


def rank_lines(out, marker):
    """The lines of every rank that contain `marker`, in rank order."""
    return sorted(line for line in out.splitlines() if line.startswith("rank ") and marker in line)


# %% [markdown]
# Two processes on this machine, with three message sizes for the timing
# (square float32 matrices with sides 8, 64 and 512: 256 bytes, 16 KiB and
# 1 MiB). The first lines show each process with its own rank, device and the
# backend they agreed on; rank 0 then prints the timing table.

# %% tags=["nbval-ignore-output"]
job = start(*"--nproc-per-node 2 -m d2l_gpu.distributed --sizes 8 64 512 --repeats 10".split())
out = finish(job)
print(*rank_lines(out, "device"), sep="\n")
print(*(line for line in out.splitlines() if not line.startswith("rank ")), sep="\n")

# %% [markdown]
# Whatever the hardware, the sums are the same: rank `r` sent
# `[1, 2, 3, 4] * (r + 1)`, so with two ranks every entry is multiplied by 3.

# %%
print(*rank_lines(out, "all_reduce(sum)"), sep="\n")
devices = [line.split("device ")[1].split(",")[0] for line in rank_lines(out, "device")]
backends = {line.rsplit("backend ", 1)[1] for line in rank_lines(out, "device")}
chosen = distributed.choose_backend([torch.device(d).type for d in devices])
print("backend agrees with choose_backend:", backends == {chosen})

# %% [markdown]
# ## Lesson 3: communication costs more than computation
#
# The table compares, for the same matrix, the `all_reduce` (the sum of two
# matrices that live in two processes) with the local sum `x + y` and the
# product `x @ x`. Two timing details matter. A collective only finishes when
# every rank has joined, so `d2l_gpu.benchmark`, which decides on its own how
# many times to call a function, cannot time it: two ranks would make a
# different number of calls and one would wait forever. The demo calls it a
# fixed number of times, lines the ranks up with a barrier before each call,
# synchronizes the device and reports the median of rank 0's clock. The local
# operations need no partner, so `d2l_gpu.benchmark` times them as usual.
#
# What this CPU run shows: the 256-byte `all_reduce` takes from several hundred
# microseconds to a few milliseconds (the spread is wide on a small, busy machine;
# see the IQR), where the local sum takes a few microseconds, hundreds of times
# less. That is latency: the cost of waking the other process and a round trip
# through the operating system, paid however little data there is, like the
# many small transfers in the side notes. At 1 MiB, `all_reduce` still costs tens of times
# `x + y` or more, but the 512 x 512 matrix product now costs about as much as
# sending the matrix (the last ratio comes out near 1, sometimes below, on this
# machine): its work grows with the cube of the side, the data only with the
# square. (`torchrun` gives each process a single CPU thread unless
# `OMP_NUM_THREADS` says otherwise, so the product runs on one core.)
#
# On GPUs with `nccl` the same table is worth running yourself: the product of
# a 512 x 512 matrix becomes very fast while a collective still pays a fixed
# start-up cost, so communication dominates for a wider range of sizes. That
# is why training code sends gradients in large buckets, and overlaps sending
# them with computing the next ones, rather than sending each small tensor alone.

# %% [markdown]
# ## Two servers
#
# On two real servers you run the same command on each one, changing only
# `--node-rank`; `HOST:PORT` is an address of the first server that the second
# can reach:
#
# ```bash
# # on server 0 (its address is HOST)
# torchrun --nnodes 2 --node-rank 0 --nproc-per-node 4 --rdzv-backend c10d \
#     --rdzv-id my-job --rdzv-endpoint HOST:29500 -m d2l_gpu.distributed
# # on server 1
# torchrun --nnodes 2 --node-rank 1 --nproc-per-node 4 --rdzv-backend c10d \
#     --rdzv-id my-job --rdzv-endpoint HOST:29500 -m d2l_gpu.distributed
# ```
#
# The `c10d` rendezvous waits until both servers have joined, then numbers
# all eight processes (in the order the servers joined, so either may hold
# rank 0). Here both "servers" are this machine: two `torchrun` launches with one
# process each, meeting at a free port on 127.0.0.1. `--local-addr 127.0.0.1`
# keeps all their traffic on the loopback interface.

# %% tags=["nbval-ignore-output"]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
two_nodes = (
    "--nnodes 2 --node-rank {node} --nproc-per-node 1 --rdzv-backend c10d --rdzv-id two-nodes "
    "--rdzv-endpoint 127.0.0.1:{port} --local-addr 127.0.0.1 -m d2l_gpu.distributed --sizes"
)
nodes = [start(*two_nodes.format(node=node, port=port).split()) for node in (0, 1)]
node_out = [finish(node) for node in nodes]
for node, out in enumerate(node_out):
    print(f"node {node}:", *rank_lines(out, "device"), sep="\n  ")

# %% [markdown]
# Each launch has local rank 0 only, but together they form one job of two
# ranks, and the all-reduced values are the same as before:

# %%
both = "\n".join(node_out)
print(*rank_lines(both, "all_reduce(sum)"), sep="\n")
local_ranks = [line.split("local rank ")[1].split(",")[0] for line in rank_lines(both, "device")]
print("local ranks:", sorted(local_ranks))

# %% [markdown]
# ## When a rank fails
#
# If one process raises, the others would wait for it forever inside their
# next collective. `torchrun` watches its processes and stops the rest as soon
# as one exits with an error, then prints a summary whose "Root Cause" is the
# failing rank's traceback. Try it with the demo's `--fail-rank 1` option:
# `torchrun --nproc-per-node 2 -m d2l_gpu.distributed --fail-rank 1` exits with
# an error within seconds and shows `RuntimeError: rank 1 failed on purpose`.
#
# ## Summary
#
# - `torchrun` starts one process per device and tells each its `RANK`,
#   `WORLD_SIZE` and `LOCAL_RANK`; the same script runs on one machine or many.
# - Every process owns one device (the `LOCAL_RANK`-th GPU, or the CPU), and the
#   tensors it sends must already be there; the backend must suit every rank.
# - A collective costs much more than the arithmetic it replaces, and small
#   messages pay mostly for latency: send few, large messages.
#
# ## Exercises
#
# 1. Run the demo with 1, 2 and 4 processes (`--nproc-per-node`). How do the
#    small-message and the 1 MiB times change with the number of ranks?
# 2. Add larger sizes (`--sizes 1024 2048`). At which size does the `all_reduce`
#    stop being latency-bound, that is, grow in proportion to the bytes sent?
# 3. On a machine with two GPUs, compare `--backend nccl` with `--backend gloo`.
#    Which one moves the data between the cards without going through the CPU?
