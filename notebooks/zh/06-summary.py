# %% [markdown]
# # 小结：三条规则，外加一个实测的常见错误
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/07-summary.ipynb)
#
# 在 NVIDIA H200 上运行的结果：[输出](../gpu/nvidia-h200/zh/07-summary.ipynb)（较早版本）。
#
# **你将学到**
#
# - 用三条规则概括本节；
# - 每一步都记录训练损失要付出多少代价：与把记录留在设备上、最后一次性取回相比，实测一下；
# - 为什么只有当主机和 GPU 每一步花的时间差不多时，这笔代价才显现出来。
#
# **你需要**
#
# - 读过 [01](01-introduction.ipynb) 到 [06](06-neural-networks-and-gpus.ipynb) 各课；
#   GPU 不是必需的。
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
# ## 三条规则
#
# 1. **数据存在哪里、在哪里计算，由我们决定。** 张量和模型要么在 CPU 上，要么在某一块 GPU 上；
#    PyTorch 默认用 CPU，有 GPU 时 `d2l_gpu.try_gpu()` 会选中它。
# 2. **一次运算的所有输入必须在同一个设备上。** PyTorch 宁可报错，也不背着我们复制。
# 3. **搬数据很贵，所以要少搬、成批地搬。** 主机与 GPU 之间的复制比要处理这些数据的计算慢，
#    每次传输都有固定开销，把数值读回来还会让 CPU 停下来等 GPU。
#
# ## 典型的错误
#
# 训练循环在 GPU 上算出每个小批量的损失，为了显示进度或保存历史，
# 立刻用 `loss.item()` 把它变成 Python 浮点数，或者追加到一个 NumPy 数组里。
# 这样做每次都要等 GPU 做完此前排队的全部工作，再通过总线复制一个数回来。
# Python 等待期间不会往队列里放新任务，于是 GPU 在两步之间无事可做。
# 把记录作为张量留在设备上，到最后再一次性取回，这两种代价就都省掉了。
#
# 原书把这种停顿归咎于 Python 的全局解释器锁（GIL）。时间其实不是花在那里：
# `.item()` 等待期间，PyTorch 会释放 GIL，其他 Python 线程照样运行。真正的损失是*队列*空了。
# 负责训练的那个线程，必须等第 `k` 步在 GPU 上算完、它的数值经总线传回之后，
# 才能启动第 `k + 1` 步。于是每一步都多了一次往返（一次同步加一次极小的复制），
# 而在 Python 准备下一步要启动的核函数时，GPU 只能闲着。
#
# 下面用两种方式训练同一个小回归模型：一个用梯度下降拟合的两层网络。
# 两个循环做的运算完全相同，记下的损失也相同，唯一的区别在于损失什么时候回到主机。

# %% tags=["nbval-ignore-output"]
device = d2l_gpu.try_gpu()
# First use of the device: a one-time warning from its runtime lands here, in a
# cell whose output is not compared, rather than in the next one.
torch.ones(1, device=device)
print("training on", device)

# %%
import functools
import math

from torch import nn


def make_step(width, batch=1024, lr=0.05):
    """One gradient-descent step of a fresh network `width` features wide; returns the loss."""
    torch.manual_seed(0)
    features = torch.randn(batch, width, device=device)
    labels = features @ torch.randn(width, 1, device=device) / math.sqrt(width)
    net = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1)).to(device)

    def step():
        loss = nn.functional.mse_loss(net(features), labels)
        net.zero_grad()
        loss.backward()
        with torch.no_grad():  # plain gradient descent, as torch.optim.SGD does it
            for parameter in net.parameters():
                parameter -= lr * parameter.grad
        return loss.detach()

    return step


def train(step, log_every_step, steps=50):
    """Run `steps` steps; return the loss of every step as Python floats."""
    history = [] if log_every_step else torch.empty(steps, device=device)
    for i in range(steps):
        loss = step()
        if log_every_step:
            history.append(loss.item())  # waits for the device, copies one number
        else:
            history[i] = loss  # stays on the device
    return history if log_every_step else history.tolist()  # one copy at the end


each_step, at_the_end = train(make_step(16), True), train(make_step(16), False)
print("same losses both ways:", each_step == at_the_end)
print("loss went down:", at_the_end[-1] < at_the_end[0])

# %% [markdown]
# ## 等待什么时候有代价
#
# 每一步都要花主机一些时间把核函数排进队列，再花 GPU 一些时间执行它们。
# 把记录留在设备上时，两者可以重叠：GPU 执行第 `k` 步的同时，Python 已在排第 `k + 1` 步，
# 于是每一步的耗时约等于两者中较长的那个。用 `.item()` 时两者只能轮流进行，
# 每一步的耗时是两者之和，再加一次往返。当每一步的主机时间和设备时间相等时，
# 代价最大，最多约为两倍的时间；当其中一方占主导时，另一方就藏在它后面。
# 上面的回归只有 16 个特征宽，小到 GPU 早在 Python 排好下一步之前就做完了这一步：
# 在那里这条警告几乎显现不出来。
#
# 所以在 CUDA GPU 上，下一个单元格对逐渐加宽的网络测量每一步的这两个时间：
# 主机时间用时钟测，测的时候先让几次大矩阵乘法占住 GPU，使这些步骤只是排进队列；
# GPU 时间用两个 CUDA 事件夹住同样这些步骤来测（两者都由 `d2l_gpu.host_and_device_seconds` 完成）。然后取两者最接近的宽度。
# CPU 上没有队列：调用返回时工作就已完成，主机时间和设备时间是同一个时间，
# 任何宽度的表现都和宽度 16 一样，所以单元格只保留那个宽度。

# %% tags=["nbval-ignore-output"]
widths, per_step = [16], {}  # the width above; host and GPU seconds per step
if device.type == "cuda":
    mismatch = {}  # how far apart the two times are, on a log scale
    print(f"{'width':>6} {'host per step':>14} {'GPU per step':>13}")
    for k in range(15):  # widths 32 to 4096, by factors of sqrt(2)
        width = round(32 * 2 ** (k / 2))
        host, gpu = per_step[width] = d2l_gpu.host_and_device_seconds(make_step(width), device)
        print(f"{width:>6} {host * 1e6:>11.1f} us {gpu * 1e6:>10.1f} us")
        mismatch[width] = abs(math.log(gpu / host))
        if gpu > host:  # wider only drifts further apart
            break
    widths.append(min(mismatch, key=mismatch.get))
    print(f"host and GPU time per step match best at width {widths[-1]}")
elif device.type == "cpu":
    print("no queue on the CPU: host and device time per step are one; width 16 only")
else:  # Apple MPS and others: asynchronous too, but timed here with CUDA events only
    print(f"{device}: no CUDA events to time the GPU with; width 16 only")

# %% [markdown]
# 接下来用两种方式训练每个宽度，用 `d2l_gpu.compare` 计时：它让两个循环在 20 轮里交替进行，
# 这样机器偶尔变慢时两边都会碰上，然后逐轮计算两者的比值。若比值的中位数与 1
# 的差距在容差之内，结论就是两者相同；只有当各轮比值的中间一半都落在这个范围之外时，
# 才判定有明显差别。我们允许 25 %：在与其他程序共享的机器上，同一个循环计时两次
# 就可能相差百分之几，而我们要在 GPU 上找的代价要大得多。测量期间 PyTorch
# 只用一个 CPU 线程，免得在一台小而忙的共享机器上，结果取决于第二个核心多快被唤醒。

# %% tags=["nbval-ignore-output", "key-result"]
for width in widths:
    step = make_step(width)
    cmp = d2l_gpu.compare(
        functools.partial(train, step, False),
        functools.partial(train, step, True),
        labels=("one copy at the end", ".item() every step"),
        device=device,
        rounds=20,
        num_threads=1,
        tolerance=0.25,
    )
    host, gpu = per_step.get(width, (None, None))
    times = f" (per step: host {host * 1e6:.0f} us, GPU {gpu * 1e6:.0f} us)" if host else ""
    print(f"width {width} on {device}{times}:")
    print(cmp)

# %% [markdown]
# ## 怎样读这些结论
#
# 在 CPU 上，`.item()` 只是从内存里读出一个已经在那里的数；把记录“留在设备上”的循环，
# 每一步反而多做一点事（一次按下标的复制，要多经过一次 PyTorch 的分发器）。
# 两者都不需要等待什么，所以两个循环应当相同；结论说明了这里是否如此。
#
# 在 GPU 上，单元格打印两条结论。在宽度 16 上，主机的工作占主导，两个循环也应当相差不多。
# 在两者匹配的宽度上，Python 排队花多久，GPU 就忙多久，只有把记录留在设备上，
# 两边才能同时工作：这时每一步都调用 `.item()` 应当明显更贵，接近两倍的时间。
# 真实训练的每一步可能落在这个范围的任何位置：大模型让 GPU 忙碌的时间远远超过
# Python 排队所需，等待就几乎没有代价；快速 GPU 上的小模型和小批量会让两个时间接近，
# 代价在那里最大。[练习 3](08-exercises.ipynb) 用矩阵乘法重做了这个实验。

# %% [markdown]
# ## 本课小结
#
# - 本节可以归结为三条规则：设备由我们选择，一次运算的所有操作数在同一个设备上，
#   数据要少搬、成批地搬。
# - 每一步都把损失变成 Python 数值，会让 Python 在 GPU 工作时停止排队。当一步的主机时间
#   和 GPU 时间相等时，代价最大，最多约为两倍的时间；任何一方占主导时，代价就很小。
#   把记录作为张量留在设备上、最后复制一次，就能避免。
# - 计时比较只有和它的离散程度放在一起才有意义；GPU 上因等待而产生的代价，CPU 上测不出来。
#
# 下一篇：[08 – 练习](08-exercises.ipynb)（大大小小的计算、跨设备保存参数、
# 用矩阵乘法重做这个记录实验、两块 GPU 同时工作），然后是
# [09 – 走出一台机器](09-beyond-one-machine.ipynb)。
