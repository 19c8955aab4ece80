# %% [markdown]
# # 神经网络与 GPU：把模型放到设备上
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/06-neural-networks-and-gpus.ipynb)
#
# 在 NVIDIA H200 上运行的结果：[输出](../gpu/nvidia-h200/zh/06-neural-networks-and-gpus.ipynb)（较早版本）。
#
# **你将学到**
#
# - 怎样把模型的参数移到某个设备上，这和移动一个张量有什么不同；
# - 只要输入也在那块 GPU 上，放在 GPU 上的模型就在那里计算；
# - 后面各章要用到的惯用写法：在 `forward` 里按输入所在的位置创建张量，模型搬好之后再建优化器，
#   先在 `meta` 设备上搭模型、再在要运行的设备上把它变成实物，以及用性能分析器跟踪训练。
#
# **你需要**
#
# - 先读过 [03 – 张量与 GPU](03-tensors-and-gpus.ipynb) 到 [05 – 异步与传输](05-asynchrony-and-transfers.ipynb)；GPU 不是必需的。
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
# ## 模型也是张量
#
# 网络的权重和偏置都是张量，所以它们和别的张量一样位于某个设备上。
# `nn.Module.to(device)` 会把模型的所有参数和缓冲区一并搬过去。
# 与 `Tensor.to` 不同，它就地修改模型并返回同一个对象，
# 因此 `net = net.to(device)` 和单写 `net.to(device)` 效果一样。
#
# 本课使用第一块 GPU，没有 GPU 时用 CPU。下一个单元格选定它并用它一次，
# 这样 GPU 运行时如果有只出现一次的提示，会落在这里，而不是后面的单元格里。

# %% tags=["nbval-ignore-output"]
device = d2l_gpu.try_gpu()
torch.ones(1, device=device)
print("this lesson uses", device)

# %% [markdown]
# 下面是只有一个线性层的网络：先在 CPU 上创建（固定了随机种子，所以每台机器上的权重都一样），
# 再移到这个设备上。

# %%
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(3, 1))
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
# 在只有 CPU 的机器上，什么也不会出错；单元格改为打印 CUDA GPU 上会给出的报错信息。

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
# ## 在 `forward` 里创建张量
#
# 一个层在运行时常常要自己造一些张量：初始状态、掩码、位置编号。
# 如果写成 `torch.zeros(shape)`，即使模型和输入都在 GPU 上，这个张量也会落在 CPU 上，
# 紧接着的运算就会出错。改为从输入出发创建，它就跟着输入走：`x.new_zeros(shape)`
# 沿用 `x` 的设备和数据类型、换一个形状，`torch.zeros_like(x)` 连形状也一并沿用。
# 下面这个很小的循环模块就这样创建初始状态，所以不用改动就能在任何设备上运行。

# %%
class TinyRecurrent(nn.Module):
    """Reads a sequence step by step; the state starts as zeros made in forward."""

    def __init__(self, size):
        super().__init__()
        self.cell = nn.Linear(2 * size, size)

    def forward(self, xs):  # xs: (steps, batch, size)
        state = xs.new_zeros(xs.shape[1:])  # where xs is, in xs's dtype
        for x in xs:
            state = torch.tanh(self.cell(torch.cat([x, state], dim=1)))
        return state


rnn = TinyRecurrent(4).to(device)
state = rnn(torch.randn(5, 2, 4, device=device))
print("final state on", state.device, "| zeros_like(state) on", torch.zeros_like(state).device)

# %% [markdown]
# ## 先搬模型，再建优化器
#
# `torch.optim` 的文档要求*先*把模型搬到设备上，再为它创建优化器，
# 好让参数一直待在优化器最初看到它们的地方。
# `Module.to` 保留每个参数对象、只替换其中的数据，所以普通的 SGD 换个顺序也不会出事。
# 带状态的优化器就不行了：以 Adagrad 为例，它在创建时就在参数当时所在的地方建好累加和，
# 之后再搬模型，这些累加和会被留在原处。在 GPU 机器上，第一行显示权重在 `cuda:0`、
# 先建的优化器的状态在 `cpu`，它的这一步会失败，torch 打印的是
#
# > RuntimeError: Expected all tensors to be on the same device, but found at
# > least two devices, cuda:0 and cpu!
#
# 搬完之后才建的优化器，状态在 `cuda:0`，照常更新。在只有 CPU 的机器上什么也没有搬，所以两者都能用。

# %% tags=["nbval-ignore-output"]
torch.manual_seed(0)
model = nn.Linear(3, 1)
early = torch.optim.Adagrad(model.parameters())  # built before the move: a mistake
model.to(device)
late = torch.optim.Adagrad(model.parameters())  # built after the move: the rule
early_at, late_at = (opt.state[model.weight]["sum"].device for opt in (early, late))
print(f"weight on {model.weight.device}; Adagrad state: early on {early_at}, late on {late_at}")
model(torch.ones(2, 3, device=device)).sum().backward()
for name, optimizer in [("early", early), ("late", late)]:
    try:
        optimizer.step()
        print(f"{name} optimizer: step done")
    except RuntimeError as error:
        print(f"{name} optimizer: {type(error).__name__}: {str(error).splitlines()[0]}")

# %% [markdown]
# ## 一开始就建在设备上
#
# 先在 CPU 上搭好模型再搬走，意味着每个权重都要写两遍：一遍写进内存，一遍写进设备。
# `with torch.device(device):` 让 `device` 成为代码块内新建的、没有自己指明设备的张量和层的默认设备
# （全局的 `torch.set_default_device` 及其代价见 [01](01-introduction.ipynb)）：

# %%
with torch.device(device):
    layer = nn.Linear(3, 1)
    noise = torch.randn(2, 3)
print("layer weight on", layer.weight.device, "| noise on", noise.device)
print("outside the block, new tensors go to", torch.ones(1).device)

# %% [markdown]
# 模型大到不便建两遍、甚至在内存里根本建不下时，还有第三个地方：`meta` 设备。
# 那里的张量只有形状和数据类型，没有存储，也没有数值，所以在上面“搭”模型不花任何代价。
# 随后 `to_empty(device=...)` 在真正的设备上给每个参数分配存储（不做初始化），
# 再由各层自己的 `reset_parameters()` 在那里填上初值：单元格检查权重的分布是否正如 `nn.Linear`
# 的抽取方式，在 ±1/√（输入个数）之内均匀分布，残留在显存里的旧数据不会是这个样子。
# 加载检查点是另一种填法：单元格把一个在 CPU 上搭建的孪生模型的权重加载进来，检查两者的输出是否相同。

# %%
with torch.device("meta"):
    big = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))
count = sum(parameter.numel() for parameter in big.parameters())
print(f"{count:,} parameters on", big[0].weight.device, "with no memory behind them")
big.to_empty(device=device)
for module in big.modules():
    if isinstance(module, nn.Linear):
        module.reset_parameters()  # the usual random start, drawn on the device
print("after to_empty and reset_parameters:", big[0].weight.device)
bound, weight = 1 / 1024**0.5, big[0].weight  # nn.Linear draws from ±1/sqrt(inputs)
spread = bool(weight.abs().max() <= bound) and abs(weight.std().item() * 3**0.5 / bound - 1) < 0.01
print("first layer's weights spread as nn.Linear draws them:", spread)
torch.manual_seed(0)
twin = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))  # on the CPU
big.load_state_dict(twin.state_dict())  # copies each tensor to where big's tensor is
x = torch.randn(8, 1024)
same = torch.allclose(big(x.to(device)).cpu(), twin(x), atol=1e-3)  # room for TF32 on a GPU
print("with the twin's weights loaded, outputs equal the CPU twin's:", same)

# %% [markdown]
# ## 一步训练在设备上做了什么
#
# `torch.profiler` 会记下几步训练逐个运算执行了什么；在 CUDA GPU 上，还会记下 GPU 运行的每个核函数。
# 下面这一步正是本书其余部分的做法：从主机复制一个小批量，前向、反向、更新参数，再用 `.item()` 读出损失。
# 用一份*调度*（schedule）指定记录哪几步：`wait=1` 让第一步不受跟踪地运行（最初的核函数在这时装载，
# 各个库在这时启动）；`warmup=1` 让性能分析器在第二步里运行但不保留结果，好让它自己的启动开销落在这一步；
# `active=3` 记录随后的三步。`trace.step()` 标出每一步的结束。
#
# 接着单元格打印自身耗时（不算它调用的其他运算）最多的行：在 CUDA GPU 上，先按 GPU 时间列出 GPU
# 运行的核函数和复制，再按 CPU 时间列出 CPU 上的工作；然后是所有做复制或等待的行，最后是性能分析器自己添加的行。

# %% tags=["nbval-ignore-output"]
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, schedule

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
inputs, targets = torch.randn(512, 64), torch.randn(512, 1)  # on the host, as a loader gives them


def step():
    x, y = inputs.to(device), targets.to(device)  # host-to-device copies (none on a CPU)
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()  # waits for the device, copies one number back


on_cuda = device.type == "cuda"
activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
plan = schedule(wait=1, warmup=1, active=3, repeat=1)
# acc_events=True keeps every cycle's events: one cycle here, so it only silences a warning.
with profile(activities=activities, schedule=plan, acc_events=True) as trace:
    for _ in range(5):
        step()
        trace.step()

OWN = ("ProfilerStep", "Activity Buffer Request", "cudaDeviceSynchronize")  # the profiler's
WAITS = ("aten::copy_", "aten::_to_copy", "aten::item", "aten::_local_scalar_dense", "Memcpy")
WAITS += ("cudaMemcpy", "cudaStreamSynchronize")
rows = [e for e in trace.key_averages() if not e.key.startswith(OWN)]
kernels = [e for e in rows if e.device_type != DeviceType.CPU]  # on a GPU: what it ran
host = [e for e in rows if e.device_type == DeviceType.CPU]


def top(events, time, count):
    return sorted(events, key=lambda event: getattr(event, time), reverse=True)[:count]


def show(title, events):
    print(title)
    for event in events:
        gpu = f"{event.self_device_time_total:12.0f}" if on_cuda else f"{'-':>12}"
        name = event.key.removeprefix("void ")[:40]
        print(f"  {name:<41}{event.count:>6}{event.self_cpu_time_total:12.0f}{gpu}")


print(f"  {'operation or kernel':<41}{'calls':>6}{'self CPU us':>12}{'self GPU us':>12}")
if on_cuda:
    show("kernels and copies on the GPU, by GPU time:", top(kernels, "self_device_time_total", 8))
show("work on the CPU, by CPU time:", top(host, "self_cpu_time_total", 5 if on_cuda else 8))
show("copies and waits, wherever they rank:", [e for e in rows if e.key.startswith(WAITS)])
show("the profiler's own rows:", [e for e in trace.key_averages() if e.key.startswith(OWN)])

# %% [markdown]
# 把这张表当作一份嫌疑名单来读。在 CPU 上（保存的输出正是如此），排在前面的是矩阵乘法
# （前向的 `aten::addmm`、反向的 `aten::mm`）以及 ReLU、损失函数及其梯度的逐元素运算。
# 这里的复制都发生在内存之内：`aten::copy_` 主要是 `addmm` 把偏置复制到输出里，
# `aten::item` 和 `aten::_local_scalar_dense` 则是在读出损失。没有任何数据去往别的设备，
# 也没有任何等待，因为只有一个设备。
#
# 在 CUDA GPU 上，第一部分列出 GPU 运行了什么：来自 cuBLAS 的矩阵乘法核函数（名字里通常带 `gemm`）、
# 逐元素核函数，以及复制：`Memcpy HtoD (Pageable -> Device)` 是每一步的两个输入，
# `Memcpy DtoH (Device -> Pinned)` 是 `.item()` 读回的损失。CPU 上的 `aten::` 运算这时只负责*启动*工作，
# 和它们并列的还有 CUDA 运行时调用：每个核函数一次 `cudaLaunchKernel`，每次复制一次 `cudaMemcpyAsync`，
# 还有 `cudaStreamSynchronize`，它的自身 CPU 时间大多是 CPU 停在那里、等 GPU 做完这一步。
#
# 最后几行属于性能分析器自己。`ProfilerStep*` 是调度在每个被记录的步骤外面加的标记，
# 它的自身时间是这一步里不属于任何运算的 Python 代码。在 CUDA GPU 上，`cudaDeviceSynchronize`
# 是性能分析器停止时在等 GPU，好把每个核函数都收进来；`Activity Buffer Request` 则是 NVIDIA 的跟踪库
# CUPTI 在申请存放记录的内存，预热这一步就是为了让这件事大多在记录开始之前发生。不用调度的话，
# 这类启动开销会混在运算之间排名。有些版本的 torch 还会在每次跟踪时警告，说性能分析器
# “clears events at the end of each cycle”（每个周期结束时清空事件）。这说的是会重复的调度，
# `acc_events=True` 让警告不再出现。
# 想看时间线而不是表格，可以用 `trace.export_chrome_trace(path)` 写出一个文件，
# 交给 Perfetto 或 `chrome://tracing` 查看。

# %% [markdown]
# ## 本课小结
#
# - `net.to(device)` 就地搬动模型的参数；模型在它和输入共同所在的设备上计算，两者不在一处时会明确报错。
# - 在 `forward` 里用 `new_zeros` 或 `zeros_like` 创建的张量跟着输入走，所以模块能在任何设备上运行。
# - 先搬模型，再建优化器，优化器的状态才会建在参数旁边。
# - 把 `torch.device(...)` 当作上下文管理器，可以一开始就在设备上创建张量和层；`meta` 设备能在不占存储的情况下搭好模型，
#   再用 `to_empty` 加初始化在要运行的设备上把它变成实物。
# - 性能分析器按调度在预热之后记录的跟踪结果，显示一步训练运行了哪些运算和核函数，复制和等待又在哪里。
#
# 跨设备读写模型参数，比如在 GPU 上保存、在 CPU 上加载，是[练习](08-exercises.ipynb)之一。
# 下一篇：[07 – 小结](07-summary.ipynb)。
