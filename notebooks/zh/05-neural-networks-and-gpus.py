# %% [markdown]
# # 神经网络与 GPU：把模型放到设备上
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/05-neural-networks-and-gpus.ipynb)
#
# 这些课在 GPU 上打印的结果：[notebooks/gpu](../gpu/README.md)。
#
# **你将学到**
#
# - 怎样把模型放到某个设备上，`Module.to` 和 `Tensor.to` 有什么不同；
# - 模型的参数、输出和梯度放在哪里，输入放在别处时会发生什么；
# - 两个习惯：在 `forward` 里创建的张量跟着输入走；先搬模型，再建优化器。
#
# **你需要**
#
# - 读过 [03 – 张量与 GPU](03-tensors-and-gpus.ipynb)，知道一次运算的输入必须在同一个设备上；
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
# ## 模型也由张量组成
#
# 网络的权重和偏置都是张量，所以它们和其他张量一样，各自存放在某个设备上。
# `net.to(device)` 会把模型的全部参数和缓冲区搬到那个设备。`Tensor.to` 返回一个张量（要复制时才是新张量），
# `Module.to` 则就地修改模型，返回的还是同一个对象，所以写 `net = net.to(device)`
# 和只写 `net.to(device)`，效果相同。
#
# 本课使用第一块 GPU，没有 GPU 时使用 CPU。下面的单元格先用一次这个设备，这样 GPU 运行时库（runtime）只打印一次的提示会出现在这里，而不是后面的单元格里。

# %% tags=["nbval-ignore-output"]
device = d2l_gpu.try_gpu()
torch.ones(1, device=device)
print("this lesson uses", device)

# %% [markdown]
# 原书的网络只有一个线性层。它先在 CPU 上创建（固定了随机种子，每台机器上的权重都一样），再搬过去：

# %%
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(3, 1))
print("net.to(device) is net:", net.to(device) is net)
for name, parameter in net.named_parameters():
    print(f"{name:8} shape {tuple(parameter.shape)}, on {parameter.device}")

# %% [markdown]
# ## 输出留在模型计算的地方
#
# 输入和模型在同一个设备上时，模型就在那里计算，输出也留在那里。在 GPU 上，下面打印的张量会在 `grad_fn=...` 前面多出 `device='cuda:0'`
# （`grad_fn` 是产生这个张量的运算，自动微分顺着它往回走），数值与 CPU 上的相同。

# %%
X = torch.ones(2, 3, device=device)
net(X)

# %% [markdown]
# 只要数据和参数在同一个设备上，训练也一直在那里进行：损失、梯度和更新后的权重都在那个设备上产生，总线上没有任何数据往来。手写一步梯度下降就能看到这一点：

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
# ## 输入和模型不在同一个设备上
#
# 常见的错误是搬了模型，却忘了搬输入。这时 `nn.Linear` 里的矩阵乘法（`addmm`）拿到的两个操作数，一个在内存里，一个在 GPU 上。PyTorch 不会替你悄悄复制，而是直接报错，这和 [03](03-tensors-and-gpus.ipynb) 里张量的情形一样。在有 GPU 的机器上，下一个单元格把一个
# CPU 张量交给模型；没有 GPU 时，用一个 `meta` 张量充当第二个设备，报错的措辞也就不同。对于 CPU 张量，H200 打印的是
#
# > RuntimeError: Expected all tensors to be on the same device, but got mat1
# > is on cpu, different from other tensors on cuda:0 (when checking argument
# > in method wrapper_CUDA_addmm)
#
# 这个单元格的当前写法还没有在 GPU 上运行过。

# %%
elsewhere = "meta" if device.type == "cpu" else "cpu"  # meta 设备在这里充当第二个设备
try:
    net(torch.ones(2, 3, device=elsewhere))
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")


# %% [markdown]
# ## 在 `forward` 里创建张量
#
# 层在运行时常常要自己创建一些张量，比如初始状态、掩码或位置编号。如果写成 `torch.zeros(shape)`，即使模型和输入都在 GPU 上，这个张量也会建在 CPU 上，接下来的运算就会报错。改为从输入出发来创建，它就跟着输入走：`x.new_zeros(shape)`
# 沿用 `x` 的设备和数据类型，只换一个形状；`torch.zeros_like(x)` 连形状也一并沿用。下面这个很小的循环模块就是这样创建初始状态的，所以不用任何改动就能在任何设备上运行。

# %%
class TinyRecurrent(nn.Module):
    # 逐步读入一个序列，状态从全零开始。
    def __init__(self, size):
        super().__init__()
        self.cell = nn.Linear(2 * size, size)

    def forward(self, xs):  # xs 的形状：(步数, 批量大小, 特征数)
        state = xs.new_zeros(xs.shape[1:])  # 与 xs 在同一个设备上，数据类型也相同
        for x in xs:
            state = torch.tanh(self.cell(torch.cat([x, state], dim=1)))
        return state


rnn = TinyRecurrent(4).to(device)
state = rnn(torch.randn(5, 2, 4, device=device))
print("final state on", state.device, "| zeros_like(state) on", torch.zeros_like(state).device)

# %% [markdown]
# ## 先搬模型，再建优化器
#
# `torch.optim` 的文档要求先把模型搬到设备上，再为它创建优化器。
# `Module.to` 保留每个参数对象，只替换其中的数据，所以普通 SGD 即使顺序反了也不会出问题；
# Adam 和 RMSprop 在第一次更新时才建立状态，也不受影响。Adagrad 则不同：它在创建时就为每个参数建好一个累加和，放在参数当时所在的设备上，之后再搬模型，这些累加和仍留在原处。在 GPU 上，单元格会显示权重在 `cuda:0`、先建的优化器的状态在 `cpu`，这个优化器的更新随后失败。H200 打印的是 torch 的这条报错：
#
# > RuntimeError: Expected all tensors to be on the same device, but found at
# > least two devices, cuda:0 and cpu!
#
# 搬完模型之后才建的优化器，状态在 `cuda:0` 上，能正常更新。在只有 CPU 的机器上，什么都没有搬动，所以两个优化器都能正常更新。

# %%
torch.manual_seed(0)
model = nn.Linear(3, 1)
early = torch.optim.Adagrad(model.parameters())  # 在搬动之前创建：这是错误的做法
model.to(device)
late = torch.optim.Adagrad(model.parameters())  # 在搬动之后创建：这是正确的做法
early_at, late_at = (opt.state[model.weight]["sum"].device for opt in (early, late))
print(f"weight on {model.weight.device}; Adagrad state: early on {early_at}, late on {late_at}")
model(torch.ones(2, 3, device=device)).sum().backward()
for name, optimizer in [("early", early), ("late", late)]:
    try:
        optimizer.step()
        print(f"{name} optimizer: step done")
    except RuntimeError as error:
        print(f"{name} optimizer: {type(error).__name__}: {error}")

# %% [markdown]
# ## 本课小结
#
# - `net.to(device)` 就地搬动模型的参数。此后模型在那个设备上计算，输出、损失和梯度也都留在那里。
# - 输入在另一个设备上时，模型会报错，错误信息里写明两个设备。
# - 在 `forward` 里用 `new_zeros` 或 `zeros_like` 创建的张量跟着输入走，所以模块能在任何设备上运行。
# - 先搬模型，再建优化器，优化器的状态才会建在参数所在的设备上。
#
# 在一个设备上保存参数、在另一个设备上加载，是[练习](07-exercises.ipynb)之一；不占存储的模型和性能分析器留到 [10](10-profiler-and-meta.ipynb) 再讲，那是拓展内容。
#
# 下一课：[06 – 小结](06-summary.ipynb)，把本节的几条规则放在一起。
