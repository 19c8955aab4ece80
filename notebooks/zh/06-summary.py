# %% [markdown]
# # 小结：本节的几条规则
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/06-summary.ipynb)
#
# 这些课在 GPU 上打印的结果：[notebooks/gpu](../gpu/README.md)。
#
# **你将学到**
#
# - 本节的几条规则，每条都注明在哪一课里演示过；
# - 原书说的典型错误：每一步都记录损失，以及怎样避免。
#
# **你需要**
#
# - 读过 [01](01-introduction.ipynb) 到 [05](05-neural-networks-and-gpus.ipynb) 课；
#   GPU 不是必需的。
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
# ## 几条规则
#
# 1. **数据存在哪里、在哪里计算，由我们决定。** 不指定设备时，张量默认放在 CPU 上。用 `d2l_gpu.try_gpu()` 选一次设备，然后在各处都传入这个设备（[01](01-introduction.ipynb)、
#    [02](02-computing-devices.ipynb)）。
# 2. **一个运算的所有输入都在同一个设备上。** PyTorch 宁可报错，也不会背着我们悄悄复制（[03](03-tensors-and-gpus.ipynb)）。模型的参数也是输入：先搬模型，再建优化器（[05](05-neural-networks-and-gpus.ipynb)）。
# 3. **`.to(device)` 只在必要时复制。** 张量已在目标设备上时，它返回同一个张量；换到别的设备时，会在目标设备上分配新的存储（[03](03-tensors-and-gpus.ipynb)）。
# 4. **少搬数据，要搬就成批地搬。** 在 GPU 上，传输比对同一份数据做简单运算更耗时，而且每次传输都有固定开销（[04](04-asynchrony-and-transfers.ipynb)）。
# 5. **GPU 按队列工作。** Python 不等 GPU 就往下执行，所以凡是把数值取回主机的操作（`print`、`.item()`、`.cpu()`），都要先等排在前面的工作做完（[04](04-asynchrony-and-transfers.ipynb)）。
#
# ## 典型的错误
#
# 原书说的典型错误，是把每个小批量的损失逐个转成 Python 数值来记录。这样主机每一步都要等 GPU，不能提前把下一步排进队列，每步的耗时最多可达主机和 GPU 各自耗时之和（[04](04-asynchrony-and-transfers.ipynb) 解释并测量了这一点）。应当把记录留在设备上，最后复制一次，就像下面这样。没写 `.item()` 的地方也可能藏着等待，
# `torch.cuda.set_sync_debug_mode("warn")` 能把它们找出来。

# %%
device = d2l_gpu.try_gpu()
features = torch.randn(256, 8, device=device)
labels = features @ torch.ones(8, 1, device=device)
w = torch.zeros(8, 1, device=device, requires_grad=True)
losses = torch.zeros(20, device=device)  # 记录留在设备上
for step in range(20):
    loss = ((features @ w - labels) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
        w.grad.zero_()
    losses[step] = loss.detach()  # 不等待
history = losses.tolist()  # 最后复制一次，也只等这一次
print(f"{len(history)} losses reached the host in one copy")
print("the loss went down:", history[-1] < history[0])

# %% [markdown]
# ## 本课小结
#
# - 五条规则：选定设备；一个运算的输入放在一起；只在必要时复制；少搬数据、成批地搬；记住队列的存在。
# - 把记录留在设备上，主机就不必每一步都等一次。
#
# 下一课：[07 – 练习](07-exercises.ipynb)，用测量回答原书的四个问题。
