# %% [markdown]
# # 神经网络与 GPU：把模型放到设备上
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/06-neural-networks-and-gpus.ipynb)
#
# **你将学到**
#
# - 怎样把模型的参数移到某个设备上，这和移动一个张量有什么不同；
# - 只要输入也在那块 GPU 上，放在 GPU 上的模型就在那里计算；
# - 怎样一开始就在设备上创建张量和模型：把 `torch.device` 当作上下文管理器，或者设置默认设备。
#
# **你需要**
#
# - 先读过 [03 – 张量与 GPU](03-tensors-and-gpus.ipynb)；GPU 不是必需的。

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
# ## 模型也是张量
#
# 网络的权重和偏置都是张量，所以它们和别的张量一样位于某个设备上。
# `nn.Module.to(device)` 会把模型的所有参数和缓冲区一并搬过去。
# 与 `Tensor.to` 不同，它就地修改模型并返回同一个对象，
# 因此 `net = net.to(device)` 和单写 `net.to(device)` 效果一样。
#
# 下面是只有一个线性层的网络：先在 CPU 上创建（固定了随机种子，所以每台机器上的权重都一样），
# 再移到第一块 GPU 上；没有 GPU 时就留在 CPU 上。

# %%
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(3, 1))
device = d2l_gpu.try_gpu()
print("net.to(device) is net:", net.to(device) is net)
for name, parameter in net.named_parameters():
    print(f"{name:8} shape {tuple(parameter.shape)}, on {parameter.device}")

# %% [markdown]
# ## 输入和模型在同一个设备上
#
# 输入在同一个设备上时，模型就在那里计算，结果也留在那里。
# 在 GPU 上，打印结果会在 `grad_fn=...` 之前多出 `device='cuda:0'`
# （`grad_fn` 记录产生这个结果的运算，自动微分会顺着它往回走）；数值则和 CPU 上的一样。

# %%
X = torch.ones(2, 3, device=device)
net(X)

# %% [markdown]
# 只要数据和参数在同一个设备上，训练时一切都留在原地：损失、梯度、更新后的权重都在那里，
# 没有任何数据要经过 CPU 与 GPU 之间的总线。
# 手写一步梯度下降就能看出来（`torch.optim.SGD` 做的也是同样的更新）：

# %%
target = torch.zeros(2, 1, device=device)
loss = nn.functional.mse_loss(net(X), target)
loss.backward()
with torch.no_grad():
    for parameter in net.parameters():
        parameter -= 0.1 * parameter.grad
print("loss on", loss.device)
print("weight gradient on", net[0].weight.grad.device)
new_loss = nn.functional.mse_loss(net(X), target)
print("loss after one step is smaller:", new_loss.item() < loss.item())

# %% [markdown]
# 最常见的错误是忘了把输入也搬过去。在 GPU 机器上，下一个单元格把一个 CPU 张量喂给 GPU 上的模型，
# 得到的报错会点出两个设备，以及发现问题的那个运算（`addmm`，即 `nn.Linear` 里的矩阵乘法）。
# 在只有 CPU 的机器上，模型和输入都在 CPU 上，什么也不会出错；单元格改为打印 CUDA GPU 上会给出的报错信息。

# %% tags=["nbval-ignore-output"]
if device.type == "cpu":
    print("No GPU: model and input share the CPU. On a CUDA GPU this cell prints:")
    print(
        "RuntimeError: Expected all tensors to be on the same device, but got mat1 is on cpu, "
        "different from other tensors on cuda:0 (when checking argument in method "
        "wrapper_CUDA_addmm)"
    )
else:
    try:
        net(torch.ones(2, 3))
    except RuntimeError as error:
        print(f"{type(error).__name__}: {str(error).splitlines()[0]}")

# %% [markdown]
# ## 一开始就建在设备上
#
# 先在 CPU 上搭好模型再搬走，意味着每个权重都要写两遍：一遍写进内存，一遍写进 GPU。
# 从 PyTorch 2.0 起，有两种办法可以直接在设备上创建张量以及新层的参数：
#
# - `with torch.device(device):` 让它成为代码块内部的默认设备；
# - `torch.set_default_device(device)` 让它成为此后一切代码的默认设备，直到改回去为止。
#
# 两者都只作用于没有自己指明设备的代码。在笔记本里，上下文管理器更稳妥，
# 因为它的效果不会漏到后面的单元格里去。

# %%
with torch.device(device):
    layer = nn.Linear(3, 1)
    noise = torch.randn(2, 3)
print("layer weight on", layer.weight.device, "| noise on", noise.device)
print("outside the block, new tensors go to", torch.ones(1).device)

# %% [markdown]
# 用 `torch.set_default_device` 设下的默认设备会一直有效，直到被重置，
# 所以我们在 `finally` 块里恢复原来的默认值，即使中途出错也不例外。

# %%
previous = torch.get_default_device()
torch.set_default_device(device)
try:
    print("while set, new tensors go to", torch.zeros(1).device)
finally:
    torch.set_default_device(previous)
print("after resetting, new tensors go to", torch.zeros(1).device)

# %% [markdown]
# 跨设备读写模型参数，比如在 GPU 上保存、在 CPU 上加载，是[练习](08-exercises.ipynb)之一。
# 下一篇：[07 – 小结](07-summary.ipynb)。
