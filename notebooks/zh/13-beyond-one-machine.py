# %% [markdown]
# # 走出一台机器：进程、设备与 `torch.distributed`
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/13-beyond-one-machine.ipynb)
#
# 这些课在 GPU 上打印的结果：[notebooks/gpu](../gpu/README.md)。
#
# *书外延伸：这一课超出了原书这一节。*
#
# **你将学到**
#
# - `torchrun` 怎样为每个设备启动一个进程，并告诉每个进程它是谁；
# - 每个进程怎样挑选自己的设备，所有进程又怎样商定通信后端（`nccl` 或 `gloo`）；
# - 为什么 `all_reduce` 这样的集合通信比它所代替的本地运算耗时得多，消息越小越明显；
# - 一个进程出错时，其他进程会怎样。
#
# **你需要**
#
# - 读过 [03 – 张量与 GPU](03-tensors-and-gpus.ipynb)。GPU 不是必需的：
#   没有 GPU 时，每个进程都在 CPU 上计算，通过 `gloo` 走 TCP 通信。
#
# 代码与英文版相同（只有注释是中文），单元格打印的输出是英文；输出里的用语见[术语表](README.md#代码和输出)。

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
# ## 每个设备一个进程
#
# 在 [03](03-tensors-and-gpus.ipynb) 里，是一个进程自己在设备之间搬运张量。
# 用多块 GPU 训练时，从两块 GPU 起就改为每块 GPU 一个进程：即使只有一台机器，
# PyTorch 也推荐用 `DistributedDataParallel`（每块 GPU 一个进程），而不是让一个进程
# 驱动所有 GPU 的 `DataParallel`；跨多台机器时更是别无选择。PyTorch 的启动器
# `torchrun` 负责启动这些进程，并通过几个环境变量告诉每个进程：
#
# - `RANK`：本进程在整个作业中的编号，`0 ... WORLD_SIZE - 1`；
# - `WORLD_SIZE`：进程总数；
# - `LOCAL_RANK`：本进程在这台机器上的本地编号，它决定该用哪块 GPU；
# - `MASTER_ADDR`、`MASTER_PORT`：各进程会合、建立连接的地址。
#
# 演示程序是一个普通脚本 `all_reduce_demo.py`，放在笔记本旁边的 `scripts` 文件夹里。
# 不经 `torchrun`、直接用 Python 运行时，它不会傻等永远不来的同伴，而是说明该怎样
# 启动它，然后以状态码 2 退出。

# %%
import os
import subprocess
import tempfile
from pathlib import Path

from d2l_gpu import distributed

DEMO = Path("..", "scripts", "all_reduce_demo.py").resolve()
if "google.colab" in sys.modules and not DEMO.is_file():  # Colab 单独打开了这个笔记本
    clone = Path("d2l-gpu")
    if not clone.is_dir():  # 再次运行时沿用第一次克隆的仓库
        url = "https://github.com/d2l-gpu/d2l-gpu"
        subprocess.run(["git", "clone", "--quiet", "--depth", "1", url, str(clone)], check=True)
    DEMO = (clone / "notebooks" / "scripts" / "all_reduce_demo.py").resolve()

plain = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, timeout=60)
print("exit status:", plain.returncode)
print(plain.stderr.splitlines()[0])

# %% [markdown]
# ## 每个进程拥有一个设备
#
# `distributed.rank_device(LOCAL_RANK)` 让一台机器上的每个进程拿到自己的 GPU：
# 本地编号 0 拿第一块，1 拿第二块，依此类推；进程比 GPU 多时就轮流分配。
# （如果启动器为每个进程单独设置 `CUDA_VISIBLE_DEVICES`，每个进程就只看得见一块 GPU，
# 即 `cuda:0`。）没有 GPU 时，每个进程都在 CPU 上计算。本地编号 0 到 3 在这里分到：

# %%
print([str(distributed.rank_device(local_rank)) for local_rank in range(4)])

# %% [markdown]
# 各进程还必须约定怎样通信。`nccl` 走机器能提供的最好路径，在 NVIDIA GPU 之间
# 传数据：几块卡能直接访问彼此的显存时，走 NVLink 或 PCIe；不能时（消费级显卡和云上的卡
# 常常如此），经主机内存中转；跨机器时走网络。它要求每个进程都有一块*自己的* GPU，
# 两个进程共用一块 GPU 时会报错 `Duplicate GPU detected` 并停下。`gloo` 在哪里都能用，
# 常用的集合通信也接受 GPU 张量，只是要经 CPU 中转。单个进程看不出别的进程是否在用同一块 GPU，
# 所以 `process_group()` 先让各进程交换设备的全局标识（GPU 的 UUID；没有 GPU 时为
# `cpu`），这个标识在所有进程里含义相同。然后每个进程根据同一份列表做出同样的选择：

# %%
examples = {
    "a GPU per process": ["cuda GPU-1111", "cuda GPU-2222"],
    "two processes, one GPU": ["cuda GPU-1111", "cuda GPU-1111"],
    "a process without GPU": ["cuda GPU-1111", "cpu"],
}
for case, identities in examples.items():
    print(f"{case:<24} -> {distributed.choose_backend(identities)}")
try:  # 在 nccl 行不通的地方要求用它，会在任何数据移动之前被拒绝
    distributed.choose_backend(["cuda GPU-1111", "cuda GPU-1111"], "nccl")
except RuntimeError as e:
    print(f"{type(e).__name__}: {e}")


# %% [markdown]
# ## 从笔记本里启动作业
#
# 单元格可以用本笔记本的 Python 以子进程方式启动 `torchrun`（它与
# `python -m torch.distributed.run` 是同一个程序）。`--standalone --local-addr 127.0.0.1`
# 让单机作业只走回环接口，并使用一个空闲端口。下面的函数给每个作业一个临时文件夹，
# `torchrun` 的日志就写在这个文件夹里；它还让每个进程只用一个 CPU 线程，而 `torchrun` 自己只在
# 启动多个进程时才这样设置。作业超过时间上限就被结束，`torchrun` 会连同它的进程一起结束。

# %%
def torchrun(*args, timeout=60):
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "TMPDIR": folder, "OMP_NUM_THREADS": "1"}
        command = [sys.executable, "-m", "torch.distributed.run"]
        command += ["--standalone", "--local-addr", "127.0.0.1", *map(str, args)]
        job = subprocess.Popen(
            command, cwd=folder, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            out, err = job.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            job.terminate()  # torchrun 把 SIGTERM 转发给它的进程
            out, err = job.communicate()
    return job.returncode, out, err


# %% [markdown]
# 在这台机器上启动两个进程，计时用边长为 8、64、256 和 1024 的 float32 方阵
# （从 256 字节到 4 MiB）。
# 每个进程打印自己的编号、设备和大家商定的通信后端；然后 0 号进程打印计时结果。

# %% tags=["nbval-ignore-output"]
code, out, err = torchrun("--nproc-per-node", 2, DEMO, "--sizes", 8, 64, 256, 1024)
print(out if code == 0 else err)

# %% [markdown]
# 不论硬件如何，求和结果都一样：编号为 `r` 的进程发送 `[1, 2, 3, 4] * (r + 1)`，
# 两个进程时每个元素都乘以 3。

# %%
print(*sorted(line for line in out.splitlines() if "all_reduce(sum)" in line), sep="\n")

# %% [markdown]
# ## 通信比计算更耗时
#
# 0 号进程拿同一个矩阵，比较了 `all_reduce`（对两个进程的矩阵求和）、本地求和 `x + y`
# 和矩阵乘法 `x @ x` 的耗时。集合通信要等所有进程都加入才会完成；`d2l_gpu.benchmark`
# 会自己决定调用多少次，所以不能用它来计时，否则两个进程的调用次数不同，其中一个会永远等下去。
# 演示程序固定调用次数，每次调用前先用屏障（barrier）让各进程对齐，读时钟之前先等设备做完。
# 这样，每次 `all_reduce` 都付出了全部延迟；而本地运算按块计时，相邻的调用可能重叠。
# 读上面打印的比值时要记住这点差别。
#
# 对 256 字节的矩阵，`all_reduce` 的耗时是本地求和的许多倍。这就是延迟：唤醒另一个进程、
# 经操作系统往返一趟，数据再少也要付这笔开销。乘法的工作量随边长的立方增长，数据量只随
# 平方增长，所以到 4 MiB 时，乘法的耗时有可能超过通信。在 CPU 上，这次乘法的耗时以毫秒计，
# 确实可能超过。GPU 算完它只需以微秒计的时间，而 `gloo` 仍要经主机中转数据，所以在 GPU 上，
# 通信的耗时仍远超乘法。`nccl` 更快，但每次调用仍有一笔固定开销。
#
# 下图以消息大小为横轴，画出上面作业里 0 号进程测得的中位数。请留意两点：消息较小时，
# `all_reduce` 的耗时几乎不随大小变化；它和本地求和之间隔着很大的差距。

# %% tags=["nbval-ignore-output"]
import re

import matplotlib.pyplot as plt

US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}  # Measurement 打印的时间单位，换算成 µs
sizes = [int(b.replace(",", "")) for b in re.findall(r"\(([\d,]+) bytes\)", out)]
reduce_us = [float(t.replace(",", "")) for t in re.findall(r"all_reduce: ([\d,.]+) us", out)]
add_us = [
    float(t.replace(",", "")) * US[unit]
    for t, unit in re.findall(r"x \+ y: ([\d,.]+) (ns|us|ms|s) median", out)
]
setup = re.search(r"^timing on rank 0 \((.*)\):$", out, re.M)
fig, ax = plt.subplots(figsize=(6, 3.6))
ax.loglog(sizes, reduce_us, "o-", label="all_reduce (median of 10 calls)")
ax.loglog(sizes, add_us, "s-", label="local x + y (benchmark median)")
ax.set_xlabel("message size (bytes)")
ax.set_ylabel("time per call (µs)")
ax.set_title(f"rank 0: {setup.group(1) if setup else 'the job failed'}", fontsize=9)
ax.legend()
plt.show()
plt.close(fig)

# %% [markdown]
# `all_reduce` 的曲线一开始几乎是平的，因为这时固定开销比传输数据本身花的时间多。
# 而且不论消息多大，它都比本地求和慢。
#
# 训练代码并不自己调用 `all_reduce`，而是把模型包进
# `torch.nn.parallel.DistributedDataParallel`（DDP），和这里一样每块 GPU 一个进程。
# 在 `backward` 期间，DDP 把梯度装进最大 25 MiB 的梯度桶（`bucket_cap_mb`）。
# 一个桶的梯度一算完，就对它做 all-reduce，同时 `backward` 的其余部分继续计算。
# 所以固定开销按桶计，而不是按张量计。下面的单元格在只有一个进程的作业里构建 DDP
# （用内存里的会合点代替 `torchrun`），所以在这里也能运行：

# %%
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

device = distributed.rank_device(0)  # 本地编号 0 的进程会拿到的设备
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
try:
    model = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    ddp(torch.randn(64, 1024, device=device)).sum().backward()  # 梯度在这里做 all-reduce
    grads = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters())
    print(f"DDP on {device}, {dist.get_world_size()} process, backend {dist.get_backend()}")
    print(f"gradient buckets of up to {ddp.bucket_bytes_cap / 2**20:.0f} MiB")
    print(f"this model's gradients: {grads / 2**20:.1f} MiB per step")
finally:
    dist.destroy_process_group()

# %% [markdown]
# （`process_group()` 在每个进程里调用 `torch.cuda.set_device`，这是 DDP 的惯用写法：
# 一个进程在整个生命期里只用一块 GPU 时，设置进程级的默认设备正是合适的做法。）
#
# ## 两台服务器
#
# 在两台真正的服务器上，各运行*同一条*命令。`HOST:PORT` 是第一台服务器的一个地址，
# 第二台必须能访问到它；`join_timeout` 限定一台服务器最多等另一台多久（默认 600 秒）：
#
# ```bash
# torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d \
#     --rdzv-id my-job --rdzv-endpoint HOST:29500 --rdzv-conf join_timeout=60 \
#     all_reduce_demo.py
# ```
#
# `c10d` 会合机制等两台服务器都加入后，按各自的描述排序编号（先比各自给出的地址，
# 再比各自 `torchrun` 的进程号），与加入的先后无关；然后各进程按服务器依次编号。
# 你可以在一台机器上开两个终端来试：`HOST` 用 `127.0.0.1`，再加上
# `--local-addr 127.0.0.1`。只有一块 GPU 时，两个进程都会用 `cuda:0`；
# 交换设备标识时会发现这一点，于是它们改用 `gloo`。
#
# ## 当某个进程出错
#
# 如果一个进程抛出异常，其他进程会在下一次集合通信里永远等它。一旦有一个进程以错误退出，
# `torchrun` 就立即停掉其余进程，并打印一份失败摘要。演示程序的 `--fail-rank 1`
# 让 1 号进程在第一次 `all_reduce` 之前抛出异常：

# %%
code, out, err = torchrun("--nproc-per-node", 2, DEMO, "--fail-rank", 1, "--sizes")
print("torchrun's exit status:", code)
print(next(line for line in err.splitlines() if "RuntimeError: rank" in line).split(": ", 1)[1])
print("rank 0 printed a sum:", "all_reduce(sum)" in out)

# %% [markdown]
# ## 练习
#
# 1. 用 1、2、4 个进程（`--nproc-per-node`）运行演示程序，每个进程像这里一样只用一个
#    CPU 线程。小消息和 4 MiB 消息的耗时怎样随进程数变化？
# 2. 再加一个更大的边长（`--sizes 8 64 256 1024 2048`），重新画图。从多大开始，
#    `all_reduce` 的耗时与它发送的字节数成正比？
# 3. 在有两块 GPU 的机器上，比较 `--backend nccl` 和 `--backend gloo`。设置
#    `NCCL_DEBUG=INFO` 再运行：在你的卡之间，NCCL 走的是哪条路径（NVLink、
#    PCIe 点对点，还是共享的主机内存）？

# %% [markdown]
# ## 本课小结
#
# - `torchrun` 为每个设备启动一个进程，并告诉每个进程它的 `RANK`、`WORLD_SIZE`
#   和 `LOCAL_RANK`；从两块 GPU 起，就该这样训练。
# - 每个进程拥有一个设备，它发送的张量必须已经在这个设备上。
# - 通信后端必须适合每个进程：`nccl` 要求每个进程都有一块自己的 GPU，
#   这一点只有各进程一起才能查明；`gloo` 在哪里都能用。
# - 集合通信比它所代替的运算耗时得多，小消息的开销主要是延迟；
#   所以 DDP 把梯度装进大的梯度桶里发送。
# - 一个进程出错时，`torchrun` 会结束其余进程，而不是让它们一直等下去。
#
# 下一课：回到[目录](../README.md)。
