# %% [markdown]
# # 走出一台机器：进程、设备与 `torch.distributed`
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/07-beyond-one-machine.ipynb)
#
# **你将学到**
#
# - `torchrun` 怎样为每个设备启动一个进程，并告诉每个进程它是谁；
# - `d2l_gpu.distributed` 怎样给每个进程分配它自己的设备，并挑选适合所有进程的
#   通信后端（`nccl` 或 `gloo`）；
# - 怎样把同一个作业当作两台“服务器”来运行，这里是在 127.0.0.1 上启动两次；
# - 为什么 `all_reduce` 这样的集合通信比它所替代的算术贵得多，消息越小越明显。
#
# **你需要**
#
# - 先读过 [03 – 张量与 GPU](03-tensors-and-gpus.ipynb)；GPU 不是必需的：
#   没有 GPU 时，每个进程都在 CPU 上计算，通过 `gloo` 走 TCP 互相通信。

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
# 它们可能分布在不同的机器上，各有各的内存。PyTorch 的启动器 `torchrun`
# 负责启动这些进程，并通过几个环境变量告诉每个进程：
#
# - `RANK`：本进程在整个作业中的编号，`0 ... WORLD_SIZE - 1`；
# - `WORLD_SIZE`：进程总数；
# - `LOCAL_RANK`：本进程在这台机器上的编号，它决定该用哪块 GPU；
# - `MASTER_ADDR`、`MASTER_PORT`：各进程碰头、建立连接的地址。
#
# `d2l_gpu.distributed` 里的演示程序读取的就是这些变量。本笔记本的内核不是由
# `torchrun` 启动的，它在任何作业里都没有位置，所以演示程序不会傻等永远不来的同伴，
# 而是拒绝启动，并告诉你该怎样启动它：

# %%
from d2l_gpu import distributed

print("inside torchrun:", distributed.rank_env() is not None)

# %% tags=["nbval-ignore-output"]
print(distributed.launch_hint())

# %% [markdown]
# ## 第一课：每个进程拥有一个设备
#
# 每个进程通过 `d2l_gpu.try_gpu` 取本机第 `LOCAL_RANK` 块 GPU；没有这块 GPU 时就用 CPU。
# 在这台只有 CPU 的机器上，每个本地编号分到的都是 CPU；在一台有四块 GPU 的服务器上，
# 本地编号 0 到 3 会分到 `cuda:0` 到 `cuda:3`，第五个进程则分到 CPU。

# %%
print([str(distributed.rank_device(local_rank)) for local_rank in range(4)])

# %% [markdown]
# 进程之间还得约定怎样通信。`nccl` 在 NVIDIA GPU 之间直接传数据（走 NVLink 或网络），
# 要求每个进程都有一个 CUDA 设备；`gloo` 哪里都能用，包括 CPU 张量。演示程序的各个进程
# 先通过 `torchrun` 的碰头点交换各自的设备类型，于是大家做出同样的选择：
# 如果各进程选了不同的后端，它们会永远互相等待。

# %%
for types in (["cuda", "cuda"], ["cuda", "cpu"], ["cpu", "cpu"]):
    print(types, "->", distributed.choose_backend(types))
print(["cuda", "cuda"], "asking for gloo ->", distributed.choose_backend(["cuda", "cuda"], "gloo"))

# %% [markdown]
# 在某个进程没有 GPU 时要求用 `nccl`，会被拒绝；错误信息指出是哪个进程，以及可以改用什么：

# %% tags=["raises-exception"]
distributed.choose_backend(["cuda", "cpu"], "nccl")

# %% [markdown]
# ## 第二课：运算之前，数据要在正确的设备上
#
# 集合通信和其他运算一样：每个进程交出一个放在它自己设备上的张量。`all_reduce`
# 把所有进程的张量加起来，并把和留在每个进程的张量里。演示程序直接在本进程的设备上
# 创建张量，然后用预期的和来核对结果（使用 `nccl` 时，留在 CPU 上的张量会被拒绝，
# 就像在一个进程里跨设备计算 `x + y` 会报错一样）：

# %%
import inspect

print(inspect.getsource(distributed.check_all_reduce).rstrip())

# %% [markdown]
# ## 从笔记本里启动作业
#
# `torchrun` 是一个命令行程序（`python -m torch.distributed.run` 与它等价），
# 所以下面的单元格用本笔记本的 Python 以子进程方式启动它，工作目录是一个临时文件夹，
# 并设了时间上限：如果作业在等一个永远不来的同伴，这里会报错，而不会让笔记本卡住。
# 各进程往同一个终端打印，谁先到谁先写，所以笔记本先把它们的输出行排好序再打印。

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
# 在这台机器上启动两个进程，计时用三种消息大小（边长为 8、64、512 的 float32 方阵，
# 分别是 256 字节、16 KiB 和 1 MiB）。前几行显示每个进程的编号、设备，以及大家商定的后端；
# 接着由 0 号进程打印计时表。

# %% tags=["nbval-ignore-output"]
job = start(*"--nproc-per-node 2 -m d2l_gpu.distributed --sizes 8 64 512 --repeats 10".split())
out = finish(job)
print(*rank_lines(out, "device"), sep="\n")
print(*(line for line in out.splitlines() if not line.startswith("rank ")), sep="\n")

# %% [markdown]
# 不论硬件如何，求和结果都一样：编号为 `r` 的进程发送 `[1, 2, 3, 4] * (r + 1)`，
# 两个进程时每个元素都乘以 3。

# %%
print(*rank_lines(out, "all_reduce(sum)"), sep="\n")
devices = [line.split("device ")[1].split(",")[0] for line in rank_lines(out, "device")]
backends = {line.rsplit("backend ", 1)[1] for line in rank_lines(out, "device")}
chosen = distributed.choose_backend([torch.device(d).type for d in devices])
print("backend agrees with choose_backend:", backends == {chosen})

# %% [markdown]
# ## 第三课：通信比计算更贵
#
# 这张表针对同一个矩阵比较三件事：`all_reduce`（两个矩阵分别在两个进程里，对它们求和）、
# 本地求和 `x + y`，以及矩阵乘法 `x @ x`。计时有两个要点。集合通信要等所有进程都参与
# 才会完成，而 `d2l_gpu.benchmark` 会自行决定调用函数多少次，所以不能用它来计时：
# 两个进程的调用次数会不同，其中一个将永远等下去。演示程序固定调用次数，每次调用前用
# barrier 让各进程对齐，同步设备，并报告 0 号进程时钟的中位数。本地运算不需要同伴，
# 照常用 `d2l_gpu.benchmark` 计时。
#
# 在这次 CPU 运行中可以看到：256 字节的 `all_reduce` 要花几百微秒到几毫秒
# （在一台又小又忙的机器上波动很大，请看 IQR），而本地求和只要几微秒，两者相差几百倍。这就是延迟：唤醒另一个进程、经过操作系统往返一趟的开销，
# 数据再少也得付，正像旁注里许多次小复制的情形。到了 1 MiB，`all_reduce` 仍然是 `x + y`
# 的几十倍甚至更多，但 512 x 512 的矩阵乘法已经和发送这个矩阵差不多贵了（在这台机器上，
# 最后一列的比值接近 1，有时小于 1）：乘法的工作量随边长的立方增长，数据量只随平方增长。
# （除非 `OMP_NUM_THREADS` 另有设定，`torchrun` 给每个进程只分一个 CPU 线程，
# 所以乘法只用一个核。）
#
# 在 GPU 上用 `nccl` 时，这张表值得你亲自跑一遍：512 x 512 的矩阵乘法会变得非常快，
# 而集合通信仍要付一笔固定的启动开销，所以在更大范围的消息大小上通信都占主导。
# 这就是训练代码把梯度攒成大块再发送、并让发送与下一批梯度的计算重叠进行，
# 而不是把每个小张量单独发出去的原因。

# %% [markdown]
# ## 两台服务器
#
# 在两台真正的服务器上，两边运行同一条命令，只改 `--node-rank`；`HOST:PORT`
# 是第一台服务器的一个地址，第二台必须能访问到它：
#
# ```bash
# # 在服务器 0 上（它的地址是 HOST）
# torchrun --nnodes 2 --node-rank 0 --nproc-per-node 4 --rdzv-backend c10d \
#     --rdzv-id my-job --rdzv-endpoint HOST:29500 -m d2l_gpu.distributed
# # 在服务器 1 上
# torchrun --nnodes 2 --node-rank 1 --nproc-per-node 4 --rdzv-backend c10d \
#     --rdzv-id my-job --rdzv-endpoint HOST:29500 -m d2l_gpu.distributed
# ```
#
# `c10d` 碰头机制会等两台服务器都加入，再给全部八个进程编号（按服务器加入的先后，
# 所以哪一台拿到 0 号进程都有可能）。这里两台“服务器”都是本机：启动两次 `torchrun`，
# 每次一个进程，在 127.0.0.1 的一个空闲端口碰头。`--local-addr 127.0.0.1`
# 让它们的所有通信都走回环接口。

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
# 每次启动都只有本地编号 0，但两者合起来组成一个有两个进程的作业，
# 求和结果与前面完全相同：

# %%
both = "\n".join(node_out)
print(*rank_lines(both, "all_reduce(sum)"), sep="\n")
local_ranks = [line.split("local rank ")[1].split(",")[0] for line in rank_lines(both, "device")]
print("local ranks:", sorted(local_ranks))

# %% [markdown]
# ## 当某个进程出错
#
# 如果一个进程抛出异常，其他进程会在下一次集合通信里永远等它。`torchrun`
# 监视着它启动的进程，一旦有一个以错误退出，就立即停掉其余进程，并打印一份摘要，
# 其中的 “Root Cause” 就是出错进程的回溯信息。可以用演示程序的 `--fail-rank 1`
# 选项试试：`torchrun --nproc-per-node 2 -m d2l_gpu.distributed --fail-rank 1`
# 会在几秒内以错误退出，并显示 `RuntimeError: rank 1 failed on purpose`。
#
# ## 小结
#
# - `torchrun` 为每个设备启动一个进程，并告诉它 `RANK`、`WORLD_SIZE` 和 `LOCAL_RANK`；
#   同一个脚本既能在一台机器上跑，也能在多台机器上跑。
# - 每个进程拥有一个设备（第 `LOCAL_RANK` 块 GPU，或者 CPU），它要发送的张量必须已经在那里；
#   通信后端必须适合每一个进程。
# - 集合通信比它所替代的算术贵得多，小消息的开销主要是延迟：少发几次，每次多发一些。
#
# ## 练习
#
# 1. 分别用 1、2、4 个进程（`--nproc-per-node`）运行演示程序。
#    小消息和 1 MiB 消息的时间怎样随进程数变化？
# 2. 加上更大的尺寸（`--sizes 1024 2048`）。从多大开始，`all_reduce` 不再受延迟限制，
#    也就是时间与发送的字节数成正比增长？
# 3. 在有两块 GPU 的机器上比较 `--backend nccl` 和 `--backend gloo`。
#    哪一个在两块卡之间传数据时不经过 CPU？
