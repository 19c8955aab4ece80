# %% [markdown]
# # 走出一台机器：进程、设备与 `torch.distributed`
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/09-beyond-one-machine.ipynb)
#
# **你将学到**
#
# - `torchrun` 怎样为每个设备启动一个进程，并告诉每个进程它是谁；
# - 每个进程怎样挑选自己的设备，所有进程又怎样商定一个适合每个进程的
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
# 本笔记本的演示是一个普通程序 `all_reduce_demo.py`，放在笔记本旁边的 `scripts`
# 文件夹里；下面会展示它的函数。本笔记本的内核不是由 `torchrun` 启动的，
# 所以它不属于任何作业：

# %%
import ast
import socket
import subprocess
import tempfile
from pathlib import Path

from d2l_gpu import distributed

DEMO = Path("..", "scripts", "all_reduce_demo.py")
if "google.colab" in sys.modules and not DEMO.is_file():  # Colab opened this notebook alone
    repository = "https://github.com/d2l-gpu/d2l-gpu"
    subprocess.run(["git", "clone", "--quiet", "--depth", "1", repository, "d2l-gpu"], check=True)
    DEMO = Path("d2l-gpu", "notebooks", "scripts", "all_reduce_demo.py")
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
# 本地编号 0 拿第一块，本地编号 1 拿第二块，依此类推。进程比 GPU 多时，就依次轮流分配，
# 于是有些进程会共用一块 GPU。启动器也可以为每个进程单独设置 `CUDA_VISIBLE_DEVICES`，
# 给每个进程一块专属的 GPU；这时每个进程只看得见一块 GPU，即 `cuda:0`，就用它。
# 没有 GPU 时，每个进程都在 CPU 上计算。下面是本地编号 0 到 3 在这台机器上会分到的设备：

# %%
print([str(distributed.rank_device(local_rank)) for local_rank in range(4)])

# %% [markdown]
# 进程之间还得约定怎样通信。`nccl` 在 NVIDIA GPU 之间直接传数据（走 NVLink 或网络），
# 但前提是每个进程都有一块*自己的* GPU：两个进程共用一块 GPU 时，它会以
# “Duplicate GPU detected” 报错停下。`gloo` 哪里都能用；`all_reduce`、`broadcast`
# 这类常用集合通信也接受 GPU 张量，只是要经 CPU 中转。
# 单个进程自己看不出别的进程是否在用同一块 GPU：两个进程里的 `cuda:0`
# 可能是同一块卡，也可能是两块。所以各进程先在一个 `gloo` 组里碰头，
# 交换各自设备的一个在所有进程里都相同的名字：GPU 的 UUID，或者 `cpu`。
# 然后每个进程根据同一份列表做出同样的选择；如果各进程选得不一样，它们会永远互相等待。

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
# 所以下面的单元格用本笔记本的 Python 以子进程方式启动它，工作目录是一个临时文件夹，
# 并设了时间上限：如果作业在等一个永远不来的同伴，这里会报错，而不会让笔记本卡住。
# 各进程往同一个终端打印，谁先到谁先写，所以笔记本先把它们的输出行排好序。

# %%
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


def start(torchrun_options, demo_options, folder):
    """Start `torchrun OPTIONS all_reduce_demo.py OPTIONS` in `folder`; see finish()."""
    command = [*TORCHRUN, *torchrun_options, str(DEMO.resolve()), *demo_options]
    pipe = subprocess.PIPE
    return subprocess.Popen(command, cwd=folder, stdout=pipe, stderr=pipe, text=True)


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
    """The lines of every process that contain `marker`, in rank order."""
    return sorted(line for line in out.splitlines() if line.startswith("rank ") and marker in line)


# %% [markdown]
# 在这台机器上启动两个进程，计时用两种消息大小：边长为 8 和 512 的 float32 方阵，
# 也就是 256 字节和 1 MiB。前几行显示每个进程的编号、设备，以及大家商定的后端；
# 接着由 0 号进程打印计时结果和它们的比值。

# %% tags=["nbval-ignore-output"]
with tempfile.TemporaryDirectory() as folder:
    out = finish(start(["--nproc-per-node", "2"], ["--sizes", "8", "512"], folder))
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
# 与本地求和 `x + y` 和矩阵乘法 `x @ x` 做了比较。有两个要点。集合通信要等所有进程
# 都参与才会完成，而 `d2l_gpu.benchmark` 会自行决定调用函数多少次，所以不能用它来计时：
# 两个进程的调用次数会不同，其中一个将永远等下去。演示程序固定调用次数，每次调用前用
# barrier 让各进程对齐，并在读时钟之前等设备做完。本地运算不需要同伴，
# 照常用 `d2l_gpu.benchmark` 计时。
#
# 请看它打印的比值。对 256 字节的矩阵，`all_reduce` 是本地求和的许多倍：这就是延迟，
# 即唤醒另一个进程、经过操作系统往返一趟的开销，数据再少也得付，正像本节旁注里
# 许多次小复制的情形。对 1 MiB 的矩阵，比较的结果变了：乘法的工作量随边长的立方增长，
# 数据量只随平方增长，所以乘法追上了通信。（除非 `OMP_NUM_THREADS` 另有设定，
# `torchrun` 给每个进程只分一个 CPU 线程，所以在 CPU 上每次乘法只用一个核。）
#
# 在 GPU 上用 `nccl` 时，这张表值得你亲自跑一遍：乘法会变得非常快，
# 而集合通信仍要付一笔固定的启动开销，所以在更大范围的消息大小上通信都占主导。
# 这就是训练代码把梯度攒成大块再发送、并让发送与下一批梯度的计算重叠进行，
# 而不是把每个小张量单独发出去的原因。

# %% [markdown]
# ## 两台服务器
#
# 在两台真正的服务器上，两边运行*同一条*命令；`HOST:PORT`
# 是第一台服务器的一个地址，第二台必须能访问到它：
#
# ```bash
# torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d \
#     --rdzv-id my-job --rdzv-endpoint HOST:29500 all_reduce_demo.py
# ```
#
# `c10d` 碰头机制会等两台服务器都加入，然后按加入的先后给服务器以及其上的进程编号：
# 哪一台拿到 0 号进程都有可能，`--node-rank` 在这里不起作用（只有用固定的服务器名单，
# 即 `--rdzv-backend static` 时它才有意义）。这里两台“服务器”都是本机：启动两次
# `torchrun`，每次一个进程，在 127.0.0.1 的一个空闲端口碰头。`--local-addr 127.0.0.1`
# 让它们的通信都走回环接口。两个进程的本地编号都是 0，所以在只有一块 GPU 的机器上
# 两者都会用 `cuda:0`；交换设备名字时会发现这一点，于是它们改用 `gloo`。

# %% tags=["nbval-ignore-output"]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
two_nodes = (
    f"--nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-id two-nodes "
    f"--rdzv-endpoint 127.0.0.1:{port} --local-addr 127.0.0.1"
)
with tempfile.TemporaryDirectory() as folder:
    nodes = [start(two_nodes.split(), ["--sizes"], folder) for _ in range(2)]
    node_out = [finish(node) for node in nodes]
for launch, out in enumerate(node_out):
    print(f"launch {launch}:", *rank_lines(out, "device"))

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
# 如果一个进程抛出异常，其他进程会在下一次集合通信里永远等它。`torchrun`
# 监视着它启动的进程，一旦有一个以错误退出，就立即停掉其余进程，并打印一份摘要，
# 其中的 “Root Cause” 就是出错进程的回溯信息。可以用演示程序的 `--fail-rank 1`
# 选项试试：`torchrun --nproc-per-node 2 all_reduce_demo.py --fail-rank 1`
# 会在几秒内以错误退出，并显示 `RuntimeError: rank 1 failed on purpose`。
#
# ## 小结
#
# - `torchrun` 为每个设备启动一个进程，并告诉它 `RANK`、`WORLD_SIZE` 和 `LOCAL_RANK`；
#   同一个脚本既能在一台机器上跑，也能在多台机器上跑。
# - 每个进程拥有一个设备，它要发送的张量必须已经在那里。
# - 通信后端必须适合每一个进程：`nccl` 要求每个进程有一块自己的 GPU，
#   而这一点只有各进程合在一起才能查明；`gloo` 哪里都能运行。
# - 集合通信比它所替代的算术贵得多，小消息的开销主要是延迟：少发几次，每次多发一些。
#
# ## 练习
#
# 1. 分别用 1、2、4 个进程（`--nproc-per-node`）运行演示程序。
#    小消息和 1 MiB 消息的时间怎样随进程数变化？
# 2. 加上更大的尺寸（`--sizes 1024 2048`）。从多大开始，`all_reduce`
#    的时间与它发送的字节数成正比增长？
# 3. 在有两块 GPU 的机器上比较 `--backend nccl` 和 `--backend gloo`。
#    哪一个在两块卡之间传数据时不经过 CPU？
