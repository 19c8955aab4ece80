# %% [markdown]
# # 小结：三条规则，外加一个实测的常见错误
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/07-summary.ipynb)
#
# **你将学到**
#
# - 用三条规则概括本节；
# - 每一步都记录训练损失要付出多少代价：与把记录留在设备上、最后一次性取回相比，实测一下。
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
# 下面用两种方式训练同一个小回归模型。两个循环做的运算完全相同，记下的损失也相同，
# 唯一的区别在于损失什么时候回到主机。

# %% tags=["nbval-ignore-output"]
device = d2l_gpu.try_gpu()
# First use of the device: a one-time warning from its runtime lands here, in a
# cell whose output is not compared, rather than in the next one.
torch.ones(1, device=device)
print("training on", device)

# %%
from torch import nn

torch.manual_seed(0)
features = torch.randn(256, 16, device=device)
labels = features @ torch.randn(16, 1, device=device)


def train(log_every_step, steps=50):
    """Train a fresh linear model; return the loss of every step as Python floats."""
    torch.manual_seed(0)
    net = nn.Linear(16, 1).to(device)
    history = [] if log_every_step else torch.empty(steps, device=device)
    for step in range(steps):
        loss = nn.functional.mse_loss(net(features), labels)
        net.zero_grad()
        loss.backward()
        with torch.no_grad():  # plain gradient descent, as torch.optim.SGD does it
            for parameter in net.parameters():
                parameter -= 0.05 * parameter.grad
        if log_every_step:
            history.append(loss.item())  # waits for the device, copies one number
        else:
            history[step] = loss.detach()  # stays on the device
    return history if log_every_step else history.tolist()  # one copy at the end


each_step, at_the_end = train(True), train(False)
print("same losses both ways:", each_step == at_the_end)
print("loss went down:", at_the_end[-1] < at_the_end[0])

# %% [markdown]
# 再用 `d2l_gpu.benchmark` 分别计时（已同步，报告多次运行的中位数和四分位距）。
# 测量期间 PyTorch 只用一个 CPU 线程，免得在一台小而忙的共享机器上，
# 结果取决于第二个核心多快被唤醒。结论由单元格自己打印：只有当两个中位数之差
# 超过两者中较大的那个四分位距时，它才认为差距是真实的。

# %% tags=["nbval-ignore-output", "key-result"]
slow = d2l_gpu.benchmark(
    train, True, device=device, min_run_time=0.3, num_threads=1, label=".item() every step"
)
fast = d2l_gpu.benchmark(
    train, False, device=device, min_run_time=0.3, num_threads=1, label="one copy at the end"
)
print(slow)
print(fast)
gap, spread = slow.median - fast.median, max(slow.iqr, fast.iqr)
winner = "one copy at the end" if gap > 0 else ".item() every step"
print(f"on {device}, logging every step takes {slow.median / fast.median:.2f}x as long")
if abs(gap) > spread:
    print(f"verdict: {winner} is faster; the gap is {abs(gap) / spread:.1f}x the larger IQR")
else:
    print("verdict: no clear winner; the gap is within the larger IQR")

# %% [markdown]
# ## 怎样读这个结论
#
# 在只有 CPU 的机器上没有单独的设备要等，`.item()` 只是从内存里读出一个数。
# 把记录“留在设备上”的那个循环，每一步反而多做了一件事：
# `history[step] = loss.detach()` 是一次按下标的复制，要多经过一次 PyTorch 的分发器。
# 在 CPU 上，这次多出来的运算可能比它所替代的那次读取还贵，所以那里可能是 `.item()`
# 的循环略快，也可能两者打平；这台机器上是哪一种，由单元格打印。
#
# 到了 GPU 上，顺序应当反过来。按下标的复制只是往队列里多放一个核函数，
# CPU 只付出启动它的代价；而每次 `.item()` 都强制同步：CPU 要停下来，等 GPU 做完这一步，
# 然后才开始准备下一步。所以在 GPU 上应当预期“最后一次性取回”的循环更快，
# 而且每一步越小，领先越多。这只是预期，不是测量结果：在 GPU 上运行这个单元格，才能看到具体数字。
# [练习 3](08-exercises.ipynb) 用更重的每一步重做了这个实验。

# %% [markdown]
# ## 本课小结
#
# - 本节可以归结为三条规则：设备由我们选择，一次运算的所有操作数在同一个设备上，
#   数据要少搬、成批地搬。
# - 每一步都把损失变成 Python 数值，会让 GPU 的队列空下来；把记录作为张量留在设备上、
#   最后复制一次，就能避免。
# - 计时比较只有和它的离散程度放在一起才有意义；GPU 上因等待而产生的代价，CPU 上测不出来。
#
# 接下来：[08 – 练习](08-exercises.ipynb)（大大小小的计算、跨设备保存参数、
# 用更重的每一步重做这个记录实验、两块 GPU 同时工作），然后是
# [09 – 走出一台机器](09-beyond-one-machine.ipynb)。
