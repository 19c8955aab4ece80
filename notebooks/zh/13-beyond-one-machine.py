# %% [markdown]
# # 走出单机：进程、设备与 `torch.distributed`
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/13-beyond-one-machine.ipynb)
#
# 这些课在 GPU 上打印的结果：[notebooks/gpu](../gpu/README.md)。
#
# *拓展内容：本课超出了原书本节的范围。*
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
# - 读过 [03 – 张量与 GPU](03-tensors-and-gpus.ipynb)。GPU 不是必需的：没有 GPU 时，每个进程都在 CPU 上计算，通过 `gloo` 走 TCP 通信。
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
# 在 [03](03-tensors-and-gpus.ipynb) 里，是一个进程自己在设备之间搬运张量。用两块或更多 GPU 训练时，改为每块 GPU 一个进程：即使只有一台机器，PyTorch 也推荐用 `DistributedDataParallel`，而不是让一个进程驱动所有 GPU 的 `DataParallel`；跨多台机器时更是别无选择。PyTorch 的启动器 `torchrun` 负责启动这些进程，并通过几个环境变量告诉每个进程：
#
# - `RANK`：本进程在整个作业中的编号，`0 ... WORLD_SIZE - 1`；
# - `WORLD_SIZE`：进程总数；
# - `LOCAL_RANK`：本进程在这台机器上的本地编号，它决定该用哪块 GPU；
# - `MASTER_ADDR`、`MASTER_PORT`：各进程会合、建立连接的地址。
#
# 演示程序是一个普通脚本 `all_reduce_demo.py`，放在笔记本旁边的 `scripts` 文件夹里。不经 `torchrun` 直接运行时，它会说明该怎样启动它，然后以状态码 2 退出。

# %%
import os
import subprocess
import tempfile
from pathlib import Path

from d2l_gpu import distributed

# 脚本在自己的文件旁边找演示程序；笔记本在它所在的文件夹里运行。
here = Path(__file__).parent if "__file__" in globals() else Path.cwd()
DEMO = (here / ".." / "scripts" / "all_reduce_demo.py").resolve()
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
# `distributed.rank_device(LOCAL_RANK)` 让一台机器上的每个进程拿到自己的 GPU：本地编号 0 拿第一块，1 拿第二块，依此类推；进程比 GPU 多时就轮流分配。（如果启动器为每个进程单独设置 `CUDA_VISIBLE_DEVICES`，每个进程就只看得见一块 GPU，即 `cuda:0`。）没有 GPU 时，每个进程都在 CPU 上计算。本地编号 0 到 3 在这里分到：

# %%
print([str(distributed.rank_device(local_rank)) for local_rank in range(4)])

# %% [markdown]
# 各进程还必须约定怎样通信。`nccl` 走机器能提供的最好路径，在 NVIDIA GPU 之间传数据：几块卡能直接访问彼此的显存时，走 NVLink 或 PCIe；不能时（消费级显卡和云上的卡常常如此），经主机内存中转；跨机器时走网络。它要求每个进程都有一块*自己的* GPU，两个进程共用一块 GPU 时会报错 `Duplicate GPU detected` 并停下。`gloo` 在哪里都能用，常用的集合通信也接受 GPU 张量，只是要经 CPU 中转。单个进程看不出别的进程是否在用同一块 GPU，所以 `process_group()` 先让各进程交换设备的全局标识（GPU 的 UUID；没有 GPU 时为 `cpu`），这个标识在所有进程里含义相同。然后每个进程根据同一份列表做出同样的选择：

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
# 单元格可以用本笔记本的 Python 以子进程方式启动 `torchrun`（它与 `python -m torch.distributed.run` 是同一个程序）。`--standalone --local-addr 127.0.0.1` 让单机作业只走回环接口，并使用一个空闲端口。下面的函数给每个作业一个临时文件夹存放 `torchrun` 的日志，并让每个进程只用一个 CPU 线程。作业超过时间上限就会被终止，它的进程也随之终止。

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
            job.terminate()  # torchrun 把 SIGTERM 转发给它的进程
            out, err = job.communicate()
    return job.returncode, out, err


# %% [markdown]
# 下面在这台机器上启动两个进程，用边长为 8、64、256 和 1024 的 float32 方阵（256 字节到 4 MiB）计时。作业指定用 `gloo`，这样每台机器测的都是同一个后端（练习 3 拿 `nccl` 和它对比）。每个进程打印自己的编号、设备和通信后端；然后 0 号进程打印计时结果。

# %% tags=["nbval-ignore-output"]
job = ("--nproc-per-node", 2, DEMO, "--backend", "gloo", "--sizes", 8, 64, 256, 1024)
code, timings, err = torchrun(*job)
print(timings if code == 0 else err)

# %% [markdown]
# 不论硬件如何，求和结果都一样：编号为 `r` 的进程发送 `[1, 2, 3, 4] * (r + 1)`，两个进程时每个元素都乘以 3。

# %%
print(*sorted(line for line in timings.splitlines() if "all_reduce(sum)" in line), sep="\n")

# %% [markdown]
# ## 通信比计算更耗时
#
# 0 号进程拿同一个矩阵，比较了 `all_reduce`（对两个进程的矩阵求和）、本地求和 `x + y` 和矩阵乘法 `x @ x` 的耗时。`d2l_gpu.benchmark` 会自己决定调用多少次，而各进程的调用次数一旦不同，就会在集合通信里永远等下去；所以演示程序固定调用次数，每次调用前先用屏障（barrier）让各进程对齐，读时钟之前先等设备做完。各种大小轮流进行，每轮各调用一次（先预热十轮，再计时二十轮），这样机器上别的程序忙起来时，各种大小受到的拖累相同。这样，每次 `all_reduce` 都付出了全部延迟；而本地运算按块计时，相邻的调用可能重叠。
#
# 对 256 字节的矩阵，`all_reduce` 的耗时是本地求和的许多倍。这就是延迟（唤醒另一个进程、经操作系统往返一趟），数据再少也要付。乘法的工作量随边长的立方增长，数据量只随平方增长，所以到 4 MiB 时，乘法有可能更慢：在 CPU 上确实可能。GPU 算完它只需以微秒计的时间，而 `gloo` 仍要经主机中转数据，所以在 GPU 上通信的耗时远超乘法。`nccl` 更快，但每次调用同样有一笔固定开销；这些课还没有哪次运行测过它（练习 3 在两块 GPU 上测量）。
#
# 下图以消息大小为横轴，画出每种大小二十次 `all_reduce` 中最快的一次（等空闲的核心只会让时间变长）。

# %% mystnb={"image": {"alt": "\u53cc\u5bf9\u6570\u6298\u7ebf\u56fe\uff1a\u6a2a\u8f74\u662f\u6d88\u606f\u5927\u5c0f\uff08256 \u5b57\u8282\u5230 4 MiB\uff09\uff0c\u7eb5\u8f74\u662f\u6bcf\u6b21\u8c03\u7528\u7684\u8017\u65f6\uff08\u5fae\u79d2\uff09\u3002\u4e24\u4e2a\u8fdb\u7a0b\u4e4b\u95f4\u7684 all_reduce \u5728\u6d88\u606f\u8f83\u5c0f\u65f6\u51e0\u4e4e\u662f\u5e73\u7684\uff0c\u5e76\u4e14\u5728\u6bcf\u4e2a\u5927\u5c0f\u4e0a\u90fd\u9ad8\u4e8e\u672c\u5730\u7684 x + y\uff1b\u672c\u5730\u7684 x @ x \u4e0a\u5347\u5f97\u6700\u5feb\u3002"}} tags=["nbval-ignore-output"]
import re

import matplotlib.pyplot as plt

US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}  # Measurement 打印的时间单位，换算成 µs
sizes = [int(b.replace(",", "")) for b in re.findall(r"\(([\d,]+) bytes\)", timings)]
reduce_us = [float(t.replace(",", "")) for t in re.findall(r"all_reduce: ([\d,.]+) us", timings)]


def medians_us(op):  # 一个本地运算的 benchmark 中位数，单位为 µs
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
# `all_reduce` 的曲线一开始几乎是平的，因为这时固定开销比传输数据本身花的时间多。而且不论消息多大，它都比本地求和慢。
#
# 训练代码并不自己调用 `all_reduce`，而是把模型包进 `torch.nn.parallel.DistributedDataParallel`（DDP），和这里一样每块 GPU 一个进程。在 `backward` 期间，DDP 把梯度装进最大 25 MiB 的梯度桶（`bucket_cap_mb`）。一个桶的梯度一算完，就对它做 all-reduce，同时 `backward` 的其余部分继续计算；第一个桶最多 1 MiB，好让通信尽早开始。所以固定开销按桶计，而不是按张量计。下面的单元格在只有一个进程的作业里构建 DDP（用内存里的会合点代替 `torchrun`），所以在这里也能运行：

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
# ## 两台服务器
#
# 在两台真正的服务器上，各运行*同一条*命令。`HOST:PORT` 是第一台服务器的一个地址，第二台必须能访问到它；`join_timeout` 限定一台服务器最多等另一台多久（默认 600 秒）：
#
# ```bash
# torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d \
#     --rdzv-id my-job --rdzv-endpoint HOST:29500 --rdzv-conf join_timeout=60 \
#     all_reduce_demo.py
# ```
#
# `c10d` 会合机制等两台服务器都加入后，按各自的描述排序编号（先比各自给出的地址，再比各自 `torchrun` 的进程号），与加入的先后无关；然后各进程按服务器依次编号。你可以在一台机器上开两个终端来试：`HOST` 用 `127.0.0.1`，再加上 `--local-addr 127.0.0.1`。
#
# ## 当某个进程出错
#
# 如果一个进程抛出异常，其他进程会在下一次集合通信里永远等它。一旦有一个进程以错误退出，`torchrun` 就立即停掉其余进程，并打印一份失败摘要。演示程序的 `--fail-rank 1` 让 1 号进程在第一次 `all_reduce` 之前抛出异常：

# %%
code, out, err = torchrun("--nproc-per-node", 2, DEMO, "--fail-rank", 1, "--sizes")
print("torchrun's exit status:", code)
failed = [line.split(": ", 1)[1] for line in err.splitlines() if "RuntimeError: rank" in line]
print(failed[0] if failed else "no rank's error found in torchrun's output")
print("rank 0 printed a sum:", "all_reduce(sum)" in out)


# %% [markdown]
# ## 练习：本机条件允许的，就实测作答
#
# **1.** 用 1、2、4 个进程（`--nproc-per-node`）运行演示程序，每个进程只用一个 CPU 线程。最小的消息和 4 MiB 消息的耗时怎样随进程数变化？两个进程的作业上面已经运行过；一个进程的情况在这里计时：像 DDP 单元格那样，它独自组成一个进程组（没有同伴需要和它调用同样多次，所以可以让 `benchmark` 自己决定调用次数）；四个进程只在 CPU 核心数允许每个进程一个核心时才运行。它们都用 `gloo`。

# %% tags=["nbval-ignore-output"]
def all_reduce_us(report):  # {字节数: 最快一次 all_reduce 的时间（微秒）}，取自 0 号进程打印的行
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
# 只有一个进程时没有同伴，它的 `all_reduce` 不论消息多大都很快。从两个进程起，每次调用都要等其他进程；进程越多，要等的同伴越多。
#
# **2.** 从多大开始，`all_reduce` 的耗时与字节数成正比？单元格读取上面那个作业的结果：每增大一档，耗时和字节数各增长多少；再拟合出“固定开销加上字节数除以速率”。固定开销取两条最小消息中较短的耗时（干扰只会增加耗时）；速率由最大的消息算出。

# %% tags=["nbval-ignore-output"]
from itertools import pairwise

fixed = min(reduce_us[:2], default=0)  # 最小的两条消息：几乎全是固定开销
if len(reduce_us) >= 2 and reduce_us[-1] > fixed:
    for (b0, t0), (b1, t1) in pairwise(zip(sizes, reduce_us, strict=True)):
        print(f"{b0:>9,} -> {b1:>9,} bytes: {b1 / b0:3.0f}x the bytes, {t1 / t0:5.1f}x the time")
    rate = sizes[-1] / (reduce_us[-1] - fixed)  # 固定开销之外，每微秒传的字节数
    print(f"about {fixed:,.0f} us fixed, then {rate / 1e3:.2f} GB/s;")
    print(f"the bytes cost as much as the fixed part from about {fixed * rate:,.0f} bytes on")
    if any(t1 < 0.75 * t0 for t0, t1 in pairwise(reduce_us)):
        print("a larger message took much less time: something else ran meanwhile; rerun")
else:
    print("nothing to fit: the job above failed, or its all_reduce did not grow")

# %% [markdown]
# 小于这个大小时，固定开销占主导，耗时几乎不变；大于它时，字节数占了上风。所以 DDP 用大的梯度桶。
#
# **3.** 在有两块 GPU 的机器上，比较 `--backend nccl` 和 `gloo`，并设置 `NCCL_DEBUG=INFO`，看看 NCCL 怎样在两块卡之间传数据：它的日志在 `via` 后面写出传输方式，`P2P`（卡与卡直接传，走 NVLink 和走 PCIe 都这样写）、`SHM`（经主机内存中转）或 `NET`（经网络）。P2P 走的是哪种链路，要看 `nvidia-smi topo -m`（`NV#` 表示 NVLink）。这个单元格需要两块 CUDA GPU，还没有在 GPU 上运行过。

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
# ## 本课小结
#
# - `torchrun` 为每个设备启动一个进程，并告诉每个进程它的 `RANK`、`WORLD_SIZE` 和 `LOCAL_RANK`；从两块 GPU 起，就该这样训练。
# - 每个进程拥有一个设备，它发送的张量必须已经在这个设备上。
# - 通信后端必须适合每个进程：`nccl` 要求每个进程都有一块自己的 GPU，这一点只有各进程一起才能查明；`gloo` 在哪里都能用。
# - 集合通信比它所代替的运算耗时得多，小消息的开销主要是延迟；所以 DDP 把梯度装进大的梯度桶里发送。
# - 一个进程出错时，`torchrun` 会结束其余进程，而不是让它们一直等下去。
#
# 全部课程到此结束，回到[目录](../README.md)。
