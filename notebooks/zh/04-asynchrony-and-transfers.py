# %% [markdown]
# # 异步与传输：等待和搬运数据的代价
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/04-asynchrony-and-transfers.ipynb)
#
# 这些课在 GPU 上打印的结果：[notebooks/gpu](../gpu/README.md)。
#
# **你将学到**
#
# - GPU 按队列工作，Python 不等它做完就继续往下执行；
# - 原书的几条旁注，逐条实测；
# - 每一步都等一次设备有什么代价，以及怎样找出隐藏的等待；
# - 锁页内存和 `non_blocking` 的好处、代价和风险。
#
# **你需要**
#
# - [03 – 张量与 GPU](03-tensors-and-gpus.ipynb)；GPU 不是必需的。本课的 GPU 分支还没有在 GPU 上运行过。
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
# ## GPU 在 Python 背后工作
#
# Python 对 GPU 张量调用 `torch.matmul` 时，PyTorch 把一个*核函数*（在 GPU 上运行的程序）放进 GPU 的队列，然后立即返回。这好比打电话订咖啡：结果张量马上就有了，值稍后才到。下面的单元格把十次矩阵乘法排进队列，在循环返回时和 `d2l_gpu.synchronize(device)`
# 清空队列之后各读一次时钟。在 CPU 上，每次调用都算完才返回，两次读数相近；在 GPU 上，第一次读数要小得多。所以排队的核函数出错，也要到后面某次调用才报出来（[08](08-gpu-memory.ipynb)）。

# %% tags=["nbval-ignore-output", "key-result"]
import time

device = d2l_gpu.try_gpu()
torch.set_num_threads(1)  # 只用一个 CPU 线程：计时更稳定
n = 256 if device.type == "cpu" else 4096
a = torch.randn(n, n, device=device)
c = torch.empty_like(a)
for _ in range(3):  # 预热
    torch.matmul(a, a, out=c)
d2l_gpu.synchronize(device)

start = time.perf_counter()
for _ in range(10):
    torch.matmul(a, a, out=c)
queued = time.perf_counter() - start  # Python 这边做完了
d2l_gpu.synchronize(device)
finished = time.perf_counter() - start  # 设备也做完了
print(f"10 products of {n}x{n} matrices on {device}:")
print(f"  clock read when the loop returned: {queued * 1e3:8.2f} ms")
print(f"  clock read after synchronizing:    {finished * 1e3:8.2f} ms")
if finished > 2 * queued:
    meaning = "the loop returned long before the device finished: the work was queued"
else:
    meaning = "the work was done inside each call: nothing was left in a queue"
print(f"  the second reading is {finished / queued:.1f}x the first: {meaning}")

# %% [markdown]
# ## 实测原书的旁注
#
# 下面每个单元格都用 `d2l_gpu.compare`（[09](09-timing-a-gpu.ipynb)）比较两段代码，并打印一句结论。

# %% tags=["nbval-ignore-output", "key-result"]
host = torch.randn(1024, 1024)  # 内存里的 4 MiB
on_device = host.to(device)
landing, out = torch.empty_like(on_device), torch.empty_like(on_device)
print(d2l_gpu.compare(
    lambda: torch.mul(on_device, 2, out=out),
    lambda: landing.copy_(host),
    labels=(f"x * 2 on {device}", f"copying 4 MiB to {device}"),
))
pieces = [torch.randn(1024) for _ in range(1024)]  # 同样的 4 MiB，切成 4 KiB 一份
landings = [torch.empty(1024, device=device) for _ in pieces]
print(d2l_gpu.compare(
    lambda: landing.copy_(host),
    lambda: [d.copy_(p) for d, p in zip(landings, pieces, strict=True)],
    labels=("one copy of 4 MiB", "1024 copies of 4 KiB"),
))

# %% [markdown]
# `x * 2` 读写的数据量与这次复制相同。在 GPU 上，复制要经过总线，耗时是它的许多倍；在 CPU 上，两者都只在内存里进行。下图给 1 KiB 到 64 MiB 之间不同大小的复制计时；在 CUDA GPU 上还测从锁页内存的复制，分每次都等待和不等待两种。

# %% mystnb={"image": {"alt": "\u4e24\u5e45\u53cc\u5bf9\u6570\u6298\u7ebf\u56fe\uff0c\u6a2a\u8f74\u662f 1 KiB \u5230 64 MiB \u7684\u590d\u5236\u5927\u5c0f\uff1a\u5de6\u56fe\u662f\u6bcf\u6b21\u590d\u5236\u7684\u8017\u65f6\uff08\u5fae\u79d2\uff09\uff0c\u5c0f\u590d\u5236\u65f6\u6301\u5e73\u3001\u4e4b\u540e\u4e0a\u5347\uff1b\u53f3\u56fe\u662f\u590d\u5236\u901f\u7387\uff08GB/s\uff09\uff0c\u865a\u7ebf\u6807\u51fa 64 MiB \u65f6\u6700\u5feb\u7684\u901f\u7387"}} tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt

sizes = [4**k * 1024 for k in range(9)]
ways = {"ordinary memory": (False, False)}  # （是否锁页，是否 non_blocking）
if device.type == "cuda":
    ways |= {"pinned memory": (True, False), "pinned, non_blocking": (True, True)}


def copy(size, pinned, queued):
    source = torch.empty(size // 4, pin_memory=pinned)  # 每个 float32 占 4 字节
    landing = torch.empty(size // 4, device=device)
    return lambda: landing.copy_(source, non_blocking=queued)


fig, (left, right) = plt.subplots(1, 2, figsize=(6, 3.6), layout="constrained", dpi=200)
fastest = (0.0, "")  # 64 MiB 时最快的速率，以及是哪种复制
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
# 小复制的耗时主要是固定开销，所以 1024 次小复制比一次大复制慢得多。在 CPU 上（这里只用一个线程），数据放得进缓存时，速率随大小上升；落到内存里之后，速率回落。虚线是 64 MiB 时最快的速率。在 CUDA GPU 上，大复制的速率应当稳定在总线能达到的水平，从锁页内存复制时更高；小复制时，`non_blocking` 那条曲线快出的部分来自省掉的等待，与锁页无关。
#
# 把数值读回来同样要等。`print(x)`、`x.item()`、`x.tolist()` 和 `x.cpu()`
# 都要等排在前面的工作做完，再把 GPU 张量复制到内存。在 CPU 上，下面的单元格测到的只是每次调用本身的开销；在 GPU 上，每次 `.item()` 还要等待和复制。

# %% tags=["nbval-ignore-output"]
values = torch.rand(256, device=device)
print(d2l_gpu.compare(
    lambda: values.tolist(),
    lambda: [v.item() for v in values],
    labels=("one .tolist()", "256 .item() calls"),
))

# %% [markdown]
# ## 记录损失的常见错误
#
# 原书提醒：不要把每个小批量的损失逐个转成 Python 数值来记录，并归咎于
# Python 的全局解释器锁；但 PyTorch 在等待时会释放这把锁，代价其实来自队列。
#
# 设一步训练在主机上要花 H 秒（准备数据、启动核函数），在 GPU 上要花 G 秒。在同一个 CUDA 流上，核函数一经提交（启动），只要 GPU 空闲就开始执行。所以即使一步以 `.item()` 结尾，主机和 GPU 在这一步*之内*仍然同时工作。不等待时，GPU 执行第 k 步的同时，主机已经在把第 k + 1 步排进队列，每步耗时约为 max(H, G)。每步等待一次，去掉的只是这种步与步之间的提前排队：每步的耗时落在 max(H, G) 与 H + G 之间（再加一次往返）。GPU 的工作必须等这一步的主机工作全部做完时（例如主机先准备批次），才会达到 H + G。
#
# 下面的单元格搭出这样一步：主机先生成一个批次，放进锁页内存，然后 GPU 在上面做 `depth` 次矩阵乘法。在 CUDA GPU 上，`depth` 逐步加大，直到 G 与 H 相当（两者由 `d2l_gpu.host_and_device_seconds` 测出）。

# %% tags=["nbval-ignore-output", "key-result"]
pin = device.type == "cuda"
rows, width = (64, 256) if device.type == "cpu" else (256, 4096)
weight = torch.randn(width, width, device=device) / width**0.5


def make_step(depth):
    def step():
        batch = torch.randn(rows, width, pin_memory=pin)  # 先做主机上的工作
        x = batch.to(device, non_blocking=True)
        for _ in range(depth):  # 再做 GPU 上的工作
            x = x @ weight
        return x.square().mean()

    return step


def train(step, log_every_step, steps=10):
    losses = []
    for _ in range(steps):
        loss = step()
        losses.append(loss.item() if log_every_step else loss)  # .item() 要等设备
    return losses if log_every_step else torch.stack(losses).tolist()  # 只复制一次


depth = 4
if device.type == "cuda":
    host_s, gpu_s = d2l_gpu.host_and_device_seconds(make_step(depth), device, steps=10)
    for _ in range(2):  # 直到 G 与 H 相当
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
# 在 CUDA GPU 上，两个循环每步应分别接近 max(H, G) 和 H + G；实际的一步介于两者之间。
#
# ## 找出隐藏的等待
#
# 调用 `torch.cuda.set_sync_debug_mode("warn")` 之后，遇到大多数让主机等 CUDA GPU 的操作，
# PyTorch 都会发出警告。下面的单元格打印几行相似的代码里哪些等待了；没有 CUDA 时，只打印按 PyTorch 源码每一行应有的行为。

# %% tags=["nbval-ignore-output"]
import warnings

x = torch.randn(1024, device=device)
batch = torch.randn(rows, width)
pinned = batch.pin_memory() if pin else batch
lines = {  # 会不会等 CUDA GPU
    "x * 2": (lambda: x * 2, False),
    "x.sum().item()": (lambda: x.sum().item(), True),
    "x[x > 0]": (lambda: x[x > 0], True),  # 结果有多大，只有 GPU 算完才知道
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
# 所以从普通内存复制每个批次的循环，即使不调用 `.item()`，每一步也都在等待。
#
# ## 锁页内存与 `non_blocking`
#
# CUDA GPU 只能直接从锁页（pinned，也称固定）内存复制数据。数据在普通内存里时，要先经过一块锁页的中转缓冲区，PyTorch 还要等复制结束；如果内存事先锁了页，`non_blocking=True` 只把复制排进队列。第一次锁某个大小的内存很慢：要锁住新的内存页，这些页不能再换出到磁盘；之后再锁页会复用 PyTorch 缓存的内存块，但数据仍要多复制一遍。所以缓冲区只锁页一次、反复使用，或者交给设了 `pin_memory=True` 的 `DataLoader` 去锁页。如果排队的复制还没执行就重新填充缓冲区，GPU 收到的就是新数据。这是一个*竞态*：结果取决于两件事谁先完成。主机提前排队时，只是轮流使用两块缓冲区并不能避免竞态：每块缓冲区要有自己的 CUDA 事件，复制后记录，重新填充前先等它完成。下面的单元格给锁页和复制计时，再用三种方式发送八个批次，每次复制前先排入 GPU 工作。

# %% tags=["nbval-ignore-output", "key-result"]
batch = torch.randn(2048, 1024)  # 普通内存里的 8 MiB
landing = torch.empty(batch.shape, device=device)
if pin:
    timer = d2l_gpu.Timer(device)
    pinned = batch.pin_memory()  # 第一次锁 8 MiB：要锁住新的内存页
    print(f"first pin of 8 MiB: {timer.stop() * 1e3:.2f} ms")
    print(d2l_gpu.benchmark(lambda: batch.pin_memory(), label="later pins (cached blocks)"))
    print(d2l_gpu.compare(
        lambda: landing.copy_(pinned, non_blocking=True),
        lambda: landing.copy_(batch),
        labels=("a non_blocking copy from pinned memory", "a copy from ordinary memory"),
    ))
else:
    print(f"{device} is not a CUDA GPU: nothing pinned, no CUDA API called")


def send_batches(buffers, guarded):  # 八个批次是否都完好送达？
    staging = [torch.empty(batch.shape, pin_memory=pin) for _ in range(buffers)]
    copied = [torch.cuda.Event() if pin else None for _ in staging]  # 每块缓冲区一个事件
    intact = torch.tensor(True, device=device)
    for k in range(8):
        i = k % buffers
        if guarded and pin:
            copied[i].synchronize()  # 这块缓冲区的上一次复制已经执行完
        staging[i].fill_(k)  # 重新填充
        for _ in range(5):  # 复制之前先排入的 GPU 工作
            torch.matmul(a, a, out=c)
        landing.copy_(staging[i], non_blocking=pin)
        if pin:
            copied[i].record()
        intact &= (landing == k).all()  # 不等待
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
# 复制回主机同样有竞态：`non_blocking=True` 的复制只是排进队列，CPU 读结果之前没有任何东西让它等待。下面的单元格把主机上的缓冲区填成 -1，排入二十次矩阵乘法和复制回主机的操作，在同步之前和之后各读一次最后一个元素。在 CUDA GPU 上（Apple 的 MPS 也一样），同步之前那次读取应当读到 -1。过早的读取即使读对了，也说明不了什么：竞态可能碰巧走运。
# CPU 上没有队列，也就没有竞态，所以单元格打印 `the early read was right`（读对了）。

# %% tags=["nbval-ignore-output", "key-result"]
ones = torch.ones(n, n, device=device)
product = torch.empty_like(ones)
result = torch.full((n, n), -1.0, pin_memory=pin)  # 在排入任何工作之前
d2l_gpu.synchronize(device)  # 从空队列开始
for _ in range(20):
    torch.matmul(ones, ones, out=product)  # 每个元素都等于 n
result.copy_(product, non_blocking=True)  # 排在乘法之后
too_early = result[-1, -1].item()  # CPU 张量：读取时不等待
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
# ## 本课小结
#
# - GPU 按队列工作，Python 不等它就往下执行。
# - 在 GPU 上，传输比简单运算更耗时，许多次小复制比一次大复制更慢。
# - 每步等待一次，去掉的是步与步之间的提前排队；损失要留在设备上记录。
#   `set_sync_debug_mode` 能找出隐藏的等待。
# - `non_blocking` 的复制有竞态：源缓冲区要等它自己的事件完成再重新填充，复制回主机的结果要先同步再读。
#
# 下一课：[05 – 神经网络与 GPU](05-neural-networks-and-gpus.ipynb)，把整个模型放到设备上。
