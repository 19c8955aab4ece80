# %% [markdown]
# # 走出一台机器：进程、设备与 `torch.distributed`
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/09-beyond-one-machine.ipynb)
#
# 在 NVIDIA H200 上运行的结果：[输出](../gpu/nvidia-h200/zh/09-beyond-one-machine.ipynb)（较早版本）。
#
# **你将学到**
#
# - `torchrun` 怎样为每个设备启动一个进程，并告诉每个进程它是谁；
# - 每个进程怎样挑选自己的设备，所有进程又怎样商定一个适合每个进程的
#   通信后端（`nccl` 或 `gloo`）；
# - 怎样把同一个作业当作两台“服务器”来运行，这里是在 127.0.0.1 上启动两次；
# - 为什么 `all_reduce` 这样的集合通信比在本地做同样的算术贵得多，消息越小越明显。
#
# **你需要**
#
# - 先读过 [03 – 张量与 GPU](03-tensors-and-gpus.ipynb)；GPU 不是必需的：
#   没有 GPU 时，每个进程都在 CPU 上计算，通过 `gloo` 走 TCP 互相通信。
#
# 代码和输出与英文版相同，所以单元格打印的文字是英文。

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
# ## 每个设备一个进程
#
# 在一个 Python 进程里，我们曾亲手把张量在 `cuda:0` 和 `cuda:1` 之间搬来搬去。
# GPU 一多，尤其是跨出一台服务器之后，训练就改由多个进程来做：每块 GPU 一个进程，
# 它们可能分布在几台机器上。PyTorch 的启动器 `torchrun` 负责启动这些进程，
# 并通过几个环境变量告诉每个进程：
#
# - `RANK`：本进程在整个作业中的编号，`0 ... WORLD_SIZE - 1`；
# - `WORLD_SIZE`：进程总数；
# - `LOCAL_RANK`：本进程在这台机器上的编号，它决定该用哪块 GPU；
# - `MASTER_ADDR`、`MASTER_PORT`：各进程会合、建立连接的地址。
#
# 本笔记本的演示是一个普通程序 `all_reduce_demo.py`，放在笔记本旁边的 `scripts`
# 文件夹里；下面会展示它的函数。本笔记本的内核不是由 `torchrun` 启动的，
# 所以它不属于任何作业：

# %%
import ast
import os
import re
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from d2l_gpu import distributed

DEMO = Path("..", "scripts", "all_reduce_demo.py")
if "google.colab" in sys.modules and not DEMO.is_file():  # Colab opened this notebook alone
    clone = Path("d2l-gpu")
    if not clone.is_dir():  # a second run reuses the first one's clone
        url = "https://github.com/d2l-gpu/d2l-gpu"
        subprocess.run(["git", "clone", "--quiet", "--depth", "1", url, str(clone)], check=True)
    DEMO = clone / "notebooks" / "scripts" / "all_reduce_demo.py"
print("inside torchrun:", distributed.local_rank() is not None)

# %% [markdown]
# 即使用普通的 Python 运行这个演示程序，它也不会傻等永远不来的同伴，
# 而是告诉你该怎样启动它，并以状态码 2 退出：

# %%
plain = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, timeout=60)
print("exit status:", plain.returncode)
print(plain.stderr)

# %% [markdown]
# ## 第一课：每个进程拥有一个设备
#
# `d2l_gpu.distributed.rank_device(LOCAL_RANK)` 让一台机器上的每个进程拿到自己的 GPU：
# 本地编号 0 拿第一块，本地编号 1 拿第二块，依此类推；进程比 GPU 多时就轮流分配。
# （启动器若为每个进程单独设置 `CUDA_VISIBLE_DEVICES`，每个进程就只看得见一块 GPU，
# 即 `cuda:0`。）没有 GPU 时，每个进程都在 CPU 上计算。本地编号 0 到 3 在这里分到：

# %%
print([str(distributed.rank_device(local_rank)) for local_rank in range(4)])

# %% [markdown]
# 进程之间还得约定怎样通信。`nccl` 在 NVIDIA GPU 之间直接传数据（走 NVLink 或网络），
# 但前提是每个进程都有一块*自己的* GPU：两个进程共用一块 GPU 时，它会以
# “Duplicate GPU detected” 报错停下。`gloo` 哪里都能用；常用的集合通信也接受
# GPU 张量，只是要经 CPU 中转。单个进程自己看不出别的进程是否在用同一块 GPU：
# 两个进程里的 `cuda:0` 可能是同一块卡，也可能是两块。所以各进程先在一个 `gloo`
# 进程组里会合，交换各自设备的一个在所有进程里都相同的名字：GPU 的 UUID，或者 `cpu`。
# 然后每个进程根据同一份列表做出同样的选择。

# %%
examples = {
    "a GPU per process": ["cuda GPU-1111", "cuda GPU-2222"],
    "two processes, one GPU": ["cuda GPU-1111", "cuda GPU-1111"],
    "a process without GPU": ["cuda GPU-1111", "cpu"],
}
for case, identities in examples.items():
    why = "; ".join(distributed.nccl_problems(identities))
    print(f"{case:<24} -> {distributed.choose_backend(identities)}" + (f" ({why})" if why else ""))

# %% [markdown]
# 在 `nccl` 行不通的地方要求用它，会在任何数据移动之前被拒绝，
# 错误信息会说明原因，以及可以改用什么：

# %%
try:
    distributed.choose_backend(["cuda GPU-1111", "cuda GPU-1111"], "nccl")
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# `distributed.process_group()` 在进入时做完上面这一切，退出时再离开进程组，
# 即使里面的代码抛出了异常也一样。
#
# ## 第二课：运算之前，数据要在正确的设备上
#
# 集合通信和其他运算一样：每个进程交出一个放在它自己设备上的张量。`all_reduce`
# 把所有进程的张量加起来，并把和留在每个进程的张量里。演示程序直接在本进程的设备上
# 创建张量，然后用预期的和来核对结果；和不对时，作业以错误结束：

# %%
source = DEMO.read_text(encoding="utf-8")
for node in ast.parse(source).body:
    if isinstance(node, ast.FunctionDef) and node.name in ("check_all_reduce", "main"):
        print(ast.get_source_segment(source, node), end="\n\n")

# %% [markdown]
# ## 从笔记本里启动作业
#
# `torchrun` 是一个命令行程序（`python -m torch.distributed.run` 与它等价），
# 所以下面的单元格用本笔记本的 Python 以子进程方式启动它。
# `--standalone --local-addr 127.0.0.1` 让单机作业只走回环接口，并使用一个空闲端口。
# 每次启动都以一个临时文件夹作为 `TMPDIR`，torchrun 在那里写下的日志文件夹
# （`torchelastic_*`）随它一起删除。`finish()` 在同一个时间上限内等待一个作业的所有
# 启动；一旦某次启动失败或时间用完，它就结束所有还在运行的启动，并说明是哪一次失败、为什么。
#
# `torchrun` 会把每个进程限制为一个 CPU 线程（`OMP_NUM_THREADS=1`），但只在一台机器上
# 启动不止一个进程时才这样做；单独一个进程会用上所有核心。`start()` 总是设置它，
# 这样不同进程数的计时才能公平比较。

# %%
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
ONE_MACHINE = ["--standalone", "--local-addr", "127.0.0.1"]


@dataclass
class Launch:
    """One running torchrun, and the files that collect what it prints."""

    process: subprocess.Popen
    out: IO[str]
    err: IO[str]

    def read(self):
        """What it printed: (standard output, standard error)."""
        texts = []
        for file in (self.out, self.err):
            file.seek(0)
            texts.append(file.read())
            file.close()
        return texts


def start(torchrun_options, demo_options, folder):
    """Start `torchrun OPTIONS all_reduce_demo.py OPTIONS` in `folder`; see finish()."""
    command = [*TORCHRUN, *torchrun_options, str(DEMO.resolve()), *demo_options]
    env = {**os.environ, "TMPDIR": folder, "OMP_NUM_THREADS": "1"}
    out, err = (tempfile.TemporaryFile("w+", dir=folder) for _ in range(2))
    process = subprocess.Popen(command, cwd=folder, env=env, stdout=out, stderr=err, text=True)
    return Launch(process, out, err)


def first_error(err):
    """The first exception printed: the process that failed first prints it before the
    others fail in turn (torchrun's "Root Cause" compares whole seconds, and may not)."""
    # An exception line, e.g. "[rank1]: RuntimeError: ...", not a source line that raises one.
    found = re.search(r"^(?:\[rank\d+\]:)?\s*(?:[\w.]+\.)?(\w+(?:Error|Exception)\b.*)$", err, re.M)
    return found[1] if found else (err.strip().splitlines() or ["no error output"])[-1]


def finish(launches, timeout=60):
    """Wait for every launch, `timeout` seconds in all; return what each printed.

    A failed launch ends the others (they would wait for it forever), and so
    does the time limit; the error names the launch that failed and its exception.
    """
    deadline = time.monotonic() + timeout
    codes = [launch.process.poll() for launch in launches]
    try:
        while None in codes and not any(codes) and time.monotonic() < deadline:
            time.sleep(0.1)
            codes = [launch.process.poll() for launch in launches]
    finally:  # also when the wait itself is interrupted
        for launch in launches:
            if launch.process.poll() is None:
                launch.process.terminate()  # torchrun ends its own processes on SIGTERM
                launch.process.wait(timeout=60)
    outputs = [launch.read() for launch in launches]
    for i, code in enumerate(codes):
        if code:
            why = f"exited with status {code}: {first_error(outputs[i][1])}"
            raise RuntimeError(f"launch {i} of {len(launches)} {why}")
    if None in codes:
        raise RuntimeError(f"launch {codes.index(None)} still running after {timeout} s: ended")
    return [out for out, _ in outputs]


def rank_lines(out, marker):
    """The lines of every process that contain `marker`, in rank order."""
    return sorted(line for line in out.splitlines() if line.startswith("rank ") and marker in line)


# %% [markdown]
# 在这台机器上启动两个进程，计时用边长为 8 和 1024 的 float32 方阵（256 字节和 4 MiB）。
# 每个进程打印自己的编号、设备和大家商定的后端；接着由 0 号进程打印计时结果和它们的比值。

# %% tags=["nbval-ignore-output"]
with tempfile.TemporaryDirectory() as folder:
    launch = start([*ONE_MACHINE, "--nproc-per-node", "2"], ["--sizes", "8", "1024"], folder)
    [out] = finish([launch])
print(*rank_lines(out, "device"), sep="\n")
print(*(line for line in out.splitlines() if not line.startswith("rank ")), sep="\n")

# %% [markdown]
# 不论硬件如何，求和结果都一样：编号为 `r` 的进程发送 `[1, 2, 3, 4] * (r + 1)`，
# 两个进程时每个元素都乘以 3。

# %%
print(*rank_lines(out, "all_reduce(sum)"), sep="\n")

# %% [markdown]
# ## 第三课：通信比计算更贵
#
# 0 号进程针对同一个矩阵，把 `all_reduce`（两个矩阵分别在两个进程里，对它们求和）
# 与本地求和 `x + y` 和矩阵乘法 `x @ x` 做了比较。集合通信要等所有进程都参与才会完成，
# 而 `d2l_gpu.benchmark` 会自行决定调用函数多少次，所以不能用它来计时：两个进程的
# 调用次数会不同，其中一个将永远等下去。演示程序固定调用次数，每次调用前用屏障
# （barrier）让各进程对齐，并在读时钟之前等设备做完。
#
# 请看它打印的比值。对 256 字节的矩阵，`all_reduce` 是本地求和的许多倍：这就是延迟，
# 即唤醒另一个进程、经过操作系统往返一趟的开销，数据再少也得付。乘法的工作量随边长的
# 立方增长，数据量只随平方增长，所以到 4 MiB 时乘法有可能追上通信。在 CPU 上，
# 这样一次乘法要花几毫秒，它确实可能追上。GPU 只用几微秒就能算完，而 `gloo`
# 仍要经主机中转数据，所以在那里通信依然遥遥领先；`nccl` 更快，但每次调用
# 仍要付一笔固定开销。每个大小的最后一行说明了这里哪一个耗时更长。
#
# 训练代码并不亲自调用 `all_reduce`。它把模型包进
# `torch.nn.parallel.DistributedDataParallel`（DDP），和这里一样每块 GPU 一个进程；
# DDP 在 `backward` 期间对梯度做 all-reduce：不是一个张量一个张量地发，而是装进
# 最大 25 MiB 的梯度桶（`bucket_cap_mb`），每个桶的梯度一算完就发出去，
# 同时 `backward` 的其余部分还在计算：固定开销按桶付一次，而不是每个张量付一次。
# 下面的单元格在只有一个进程的作业里构建 DDP（用内存里的会合点代替 `torchrun`），
# 所以在这里也能运行：

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
# ## 两台服务器
#
# 在两台真正的服务器上，两边运行*同一条*命令；`HOST:PORT` 是第一台服务器的一个地址，
# 第二台必须能访问到它；`join_timeout` 限定一台服务器最多等另一台多久（默认 600 秒）：
#
# ```bash
# torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d \
#     --rdzv-id my-job --rdzv-endpoint HOST:29500 --rdzv-conf join_timeout=60 \
#     all_reduce_demo.py
# ```
#
# `c10d` 会合等两台服务器都加入后，把它们的描述排序来编号：先比各自给出的地址
# （`--local-addr`，没有就用主机名），再比各自 `torchrun` 的进程号。加入的先后不起作用，
# `--node-rank` 也不起作用（只有用固定的服务器名单，即 `--rdzv-backend static` 时它才有意义）；
# 然后各进程按服务器依次编号。这里两台“服务器”都是本机：启动两次 `torchrun`，
# 每次一个进程，在 127.0.0.1 的一个空闲端口会合，所以进程号较小的那次启动拿到 0 号。
# 两个进程的本地编号都是 0，所以在只有一块 GPU 的机器上两者都会用 `cuda:0`；
# 交换设备名字时会发现这一点，于是它们改用 `gloo`。

# %% tags=["nbval-ignore-output"]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
two_nodes = (
    f"--nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-id two-nodes "
    f"--rdzv-endpoint 127.0.0.1:{port} --local-addr 127.0.0.1 --rdzv-conf join_timeout=30"
).split()
with tempfile.TemporaryDirectory() as folder:
    nodes = [start(two_nodes, ["--sizes", "--timeout", "30"], folder) for _ in range(2)]
    node_out = finish(nodes)
for i, (node, out) in enumerate(zip(nodes, node_out, strict=True)):
    print(f"launch {i} (torchrun pid {node.process.pid}):", *rank_lines(out, "device"))

# %% [markdown]
# 每次启动都只有本地编号 0，但两者合起来组成一个有两个进程的作业，
# 求和结果与前面完全相同：

# %%
both = "\n".join(node_out)
print(*rank_lines(both, "all_reduce(sum)"), sep="\n")
local_ranks = [line.split("local rank ")[1].split(",")[0] for line in rank_lines(both, "device")]
print("local ranks:", local_ranks)

# %% [markdown]
# ## 当某个进程出错
#
# 如果一个进程抛出异常，其他进程会在下一次集合通信里永远等它。一旦有一个进程以错误退出，
# `torchrun` 就立即停掉其余进程，并打印一份失败摘要。演示程序的 `--fail-rank 1`
# 让 1 号进程抛出异常；`finish()` 报告最先打印出来的那个异常，
# torchrun 的日志文件夹也随本单元格的临时文件夹一起删除：

# %%
with tempfile.TemporaryDirectory() as folder:
    failing = start([*ONE_MACHINE, "--nproc-per-node", "2"], ["--fail-rank", "1"], folder)
    try:
        finish([failing])
    except RuntimeError as error:
        print(f"{type(error).__name__}: {error}")
    logs = list(Path(folder).glob("torchelastic_*"))
    print("torchrun log folders in this cell's folder:", len(logs))
print("that folder removed:", not Path(folder).exists())

# %% [markdown]
# ## 练习
#
# 1. 分别用 1、2、4 个进程（`--nproc-per-node`）运行演示程序，每个进程一个 CPU 线程，
#    和这里一样。小消息和 4 MiB 消息的时间怎样随进程数变化？再在终端里不设
#    `OMP_NUM_THREADS` 运行单个进程，让它用上所有核心：哪些时间变了？
# 2. 多计时几个尺寸（`--sizes 64 256 2048`）。从多大开始，`all_reduce`
#    的时间与它发送的字节数成正比增长？
# 3. 在有两块 GPU 的机器上比较 `--backend nccl` 和 `--backend gloo`。
#    哪一个在两块卡之间传数据时不经过 CPU？

# %% [markdown]
# ## 本课小结
#
# - `torchrun` 为每个设备启动一个进程，并告诉它 `RANK`、`WORLD_SIZE` 和 `LOCAL_RANK`；
#   同一个脚本既能在一台机器上跑，也能在多台机器上跑；会合按排序给机器编号，而不是按先来后到。
# - 每个进程拥有一个设备，它要发送的张量必须已经在那里。
# - 通信后端必须适合每一个进程：`nccl` 要求每个进程有一块自己的 GPU，
#   而这一点只有各进程合在一起才能查明；`gloo` 哪里都能运行。
# - 集合通信比在本地做同样的算术贵得多，小消息的开销主要是延迟；所以 DDP 把梯度装进大桶再发送。
# - 从笔记本启动作业时，每次等待都有上限，一个进程失败就结束所有进程，也不留下任何文件夹。
