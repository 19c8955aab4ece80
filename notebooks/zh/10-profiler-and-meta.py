# %% [markdown]
# # 性能分析器与 meta 设备：时间花在哪里，不占存储的模型
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/zh/10-profiler-and-meta.ipynb)
#
# 这些课在 GPU 上打印的结果：[notebooks/gpu](../gpu/README.md)。
#
# *拓展内容：本课超出了原书本节的范围。*
#
# **你将学到**
#
# - 怎样用 `torch.profiler` 记录几步训练，并用调度（schedule）把初始开销排除在记录之外；
# - 怎样读记录下来的结果：自身时间最多的算子（operator）和核函数，以及一步训练在哪里复制、在哪里等待；
# - 怎样直接在设备上创建模型，或者先在完全不占存储的 meta 设备上创建，再到要运行的设备上为它分配存储并初始化。
#
# **你需要**
#
# - 读过 [05 – 神经网络与 GPU](05-neural-networks-and-gpus.ipynb)（模型放在设备上）和 [04 – 异步与传输](04-asynchrony-and-transfers.ipynb)（CPU 的时间为什么和 GPU 的时间不同）；
# - GPU 不是必需的。在 CPU 上，性能分析器只记录 CPU 这一侧。
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
# ## 要观察的一步训练
#
# 像 [09](09-timing-a-gpu.ipynb) 那样计时，只能告诉我们一步训练用了多久，性能分析器则告诉我们这些时间花在了什么上。下面这一步就是本书其余部分反复执行的那一步：把一个小批量从内存复制到设备上，做前向传播和反向传播，更新权重，再用 `.item()` 读出损失。模型很小，好让 CPU 上的运行快些结束。

# %% tags=["nbval-ignore-output"]
from torch import nn

device = d2l_gpu.try_gpu()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
inputs, targets = torch.randn(512, 64), torch.randn(512, 1)  # 放在内存里，就像一个小批量


def step():
    x, y = inputs.to(device), targets.to(device)  # 复制到设备上（在 CPU 上不复制）
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()  # 等设备算完，再把一个数复制回来


print("this lesson uses", device)

# %% [markdown]
# ## 记录几步训练
#
# `torch.profiler.profile` 会记下 PyTorch 在 CPU 上执行的每一个算子。如果再加上 `ProfilerActivity.CUDA`，它还会记下 CUDA GPU 执行的每个核函数和每次复制，以及它们在 GPU 上用了多少时间。
#
# 一次运行最开始的几步并不典型：核函数要加载，各个库要初始化，性能分析器自己也要做准备。调度决定保留哪几步。`wait=1` 让第一步照常运行，不做跟踪；`warmup=1` 让性能分析器跟踪第二步，但丢掉结果，好让它自己的初始开销落在这一步里；`active=3` 保留随后的三步。`trace.step()` 标出每一步在哪里结束。调度可以按周期重复，有些版本的 torch 会警告说性能分析器“clears events at the end of each cycle”（每个周期结束时清空事件）。`acc_events=True` 会保留每个周期的事件；我们只有一个周期，所以它唯一的作用就是让这条警告不再出现。
#
# 单元格的第一行让 Kineto 安静下来。Kineto 是实际做记录的库，不加这一行，它每次跟踪都会往标准错误输出写一行开始信息和一行结束信息。6 比它所有的日志级别都高，所以它的错误信息也一并不再显示：如果跟踪结果是空的，想知道原因，就把这一行删掉。

# %%
import os

os.environ["KINETO_LOG_LEVEL"] = "6"  # 第一次跟踪开始时才读取
from torch.profiler import ProfilerActivity, profile, schedule

on_cuda = device.type == "cuda"
activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
plan = schedule(wait=1, warmup=1, active=3)
with profile(activities=activities, schedule=plan, acc_events=True) as trace:
    for _ in range(5):
        step()
        trace.step()
events = trace.key_averages()  # 每个名字一行，把保留下来的三步加在一起
print("steps kept:", next(e.count for e in events if e.key.startswith("ProfilerStep")))

# %% [markdown]
# ## 读这张表
#
# `key_averages()` 的每一行是一个算子或一个核函数，列出调用次数和*自身*时间，也就是花在这一行自己的代码上的时间，不包括它调用的其他算子。（例如，线性层里矩阵乘法的时间算在 `aten::addmm` 名下，而不算在调用它的那个层上。）单元格分三部分打印：
#
# - 在 CUDA GPU 上，先列出 GPU 执行的核函数和复制，按它们在 GPU 上的时间排序（`on the GPU, by GPU time`）；
# - 然后是 CPU 上的算子，按它们在 CPU 上的时间排序（`on the CPU, by CPU time`）；
# - 最后是下文提到的那些行，不管它们排在第几（`rows named in the text`）。
#
# 性能分析器自己的行不参加排序，单独列在最后一行（`the profiler's own rows`）。在 GPU 上，性能分析器通过 NVIDIA 的 CUPTI 库记录核函数，CUPTI 会把自己的工作也记成行，例如 `Activity Buffer Request`，不单独列出的话，它可能排在 CPU 部分的第一位。性能分析器还会把自己的标记（`ProfilerStep*`、`Optimizer.step#SGD.step`）复制到 GPU 的时间线上；每个标记覆盖 GPU 上的一整段时间，连空闲的间隙也算在内，不单独列出的话会排在所有核函数前面。
#
# 表头里，`operation or kernel` 一列是算子或核函数的名字，`calls` 是调用次数，`self CPU us` 和 `self GPU us` 是以微秒计的自身 CPU 时间和自身 GPU 时间；这些时间每次运行都不一样。`events.table(sort_by="self_device_time_total", row_limit=10)` 会打印 PyTorch 自带的版本，列更多。

# %% tags=["nbval-ignore-output"]
from torch.autograd import DeviceType

NAMED = ["aten::addmm", "aten::mm", "aten::item", "ProfilerStep*"]
if on_cuda:
    NAMED += ["Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)"]
    NAMED += ["cudaLaunchKernel", "cudaStreamSynchronize"]
OWN = ["Activity Buffer Request", "Buffer Flush", "Instrumentation", "Resource"]  # CUPTI 自己的工作
OWN += ["Driver Compiler", "Lazy Function Loading", "Runtime Triggered Module Loading"]
OWN += ["Command Buffer Full", "UVM Activity Init", "Unknown"]


def show(title, rows):
    print(title)
    for e in rows:
        gpu = f"{e.self_device_time_total:12.0f}" if on_cuda else f"{'-':>12}"
        name = e.key.removeprefix("void ")[:40]
        print(f"  {name:<41}{e.count:>6}{e.self_cpu_time_total:12.0f}{gpu}")


def ranked(rows, time, count):
    return sorted(rows, key=lambda e: getattr(e, time), reverse=True)[:count]


def marker_on_gpu(e):
    # 标记在 GPU 时间线上占的一段时间，不是核函数（在 CPU 上，标记本身就是一行）
    return e.is_user_annotation and e.device_type != DeviceType.CPU


print(f"  {'operation or kernel':<41}{'calls':>6}{'self CPU us':>12}{'self GPU us':>12}")
steps = [e for e in events if e.key not in OWN and not marker_on_gpu(e)]  # 把性能分析器自己的行分开
if on_cuda:
    on_gpu = [e for e in steps if e.device_type != DeviceType.CPU]
    show("on the GPU, by GPU time:", ranked(on_gpu, "self_device_time_total", 6))
on_cpu = [e for e in steps if e.device_type == DeviceType.CPU]
show("on the CPU, by CPU time:", ranked(on_cpu, "self_cpu_time_total", 6))
show("rows named in the text:", [e for name in NAMED for e in steps if e.key == name])
print("named but not recorded:", [n for n in NAMED if n not in {e.key for e in events}] or "none")
own = [e.key + (" (GPU)" if marker_on_gpu(e) else "") for e in events if e not in steps]
print("the profiler's own rows:", own or "none")

# %% [markdown]
# 这张表告诉我们该往哪里看，而不是直接给出结论。在 CPU 上（这里保存的输出就是 CPU 的），每一行都是 CPU 自己做的工作。在文中提到的几行里，矩阵乘法分成两种：`aten::addmm` 是每个线性层的前向传播（乘法加偏置），`aten::mm` 是反向传播里的乘法。`aten::item` 读出损失；在 CPU 上它没有什么要等的，所以自身时间很短。`ProfilerStep*` 是调度给每个保留下来的步骤加上的标记，它的自身时间主要是这一步里不属于任何算子的 Python 代码所用的时间。
#
# 到了 CUDA GPU 上，情况就变了，文中提到的几行正好说明变在哪里。CPU 上的 `aten::` 算子这时只负责*启动*工作，它们的 CPU 时间量的是启动的开销；真正的计算出现在表的 GPU 部分：各个库按自己的命名规则命名的核函数，以及两种复制。`Memcpy HtoD (Pageable -> Device)` 是每一步把两个输入复制到 GPU 上，`Memcpy DtoH (Device -> Pinned)` 是 `.item()` 把损失复制回来。CPU 这一侧则多出了 CUDA 运行时库的调用：`cudaLaunchKernel` 每启动一个核函数就出现一次；`cudaStreamSynchronize` 每一步出现三次。`.item()` 在这里等损失算出来，两次 `.to(device)` 复制也各等一次：从普通（可分页）内存复制时，PyTorch 先把复制排进队列，再等 GPU 的队列清空。`cudaStreamSynchronize` 的自身 CPU 时间，大多是 CPU 在空等。像 [04](04-asynchrony-and-transfers.ipynb) 那样从锁页内存复制并设 `non_blocking=True`，复制排进队列后就不必等待。文中提到、这次运行却没有记录到的行会列在倒数第二行（`named but not recorded`），而不是悄悄省略。这一段依据 PyTorch 源码写成；GPU 是否运行过现在这个单元格，见开头链接的 GPU 页面。
#
# 想看时间线而不是表格，可以用 `trace.export_chrome_trace(path)` 写出一个文件，用 [Perfetto](https://ui.perfetto.dev) 打开。时间线上还能看到空档：GPU 闲着、等 Python 准备启动下一个核函数的那些时段。

# %% [markdown]
# ## 直接在设备上创建模型
#
# 先在 CPU 上搭好模型再搬走，每个权重就要写两遍：先写进内存，再写进显存。把 `torch.device(device)` 当作上下文管理器来用，代码块里新建的张量和层只要没有自己指定设备，就会建在 `device` 上：

# %%
with torch.device(device):
    layer = nn.Linear(3, 1)
    noise = torch.randn(2, 3)
print("layer weight on", layer.weight.device, "| noise on", noise.device)
print("outside the block, new tensors go to", torch.ones(1).device)

# %% [markdown]
# ## 不占存储的模型：meta 设备
#
# 如果模型大到不便建两遍，甚至在内存里根本放不下，还有第三个地方可以创建它：meta 设备。meta 设备上的张量只有形状和数据类型，既不占存储，也没有数值，所以在上面搭模型几乎不花代价，而且可以在分配任何存储之前先核对形状和参数个数。随后，`to_empty(device=...)` 在真正的设备上为每个参数和缓冲区分配存储，但不初始化；再由各层自己的 `reset_parameters()` 在那里按通常的方式初始化。单元格对每个有这个方法的模块都调用一次，这样 BatchNorm 的滑动均值和方差这类缓冲区也会填好；没有方法负责的缓冲区，要自己赋值。
#
# 单元格会检查初始化确实做了：`nn.Linear` 的权重在 ±1/√n 内均匀抽取（n 为输入个数），所以全部权重都在这个界限之内，标准差等于界限除以 √3。内存或显存里残留的旧数据通不过这项检查。

# %%
with torch.device("meta"):
    big = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))
count = sum(parameter.numel() for parameter in big.parameters())
print(f"{count:,} parameters on", big[0].weight.device, "with no memory behind them")
big.to_empty(device=device)
for module in big.modules():
    if hasattr(module, "reset_parameters"):
        module.reset_parameters()  # 通常的初始值，直接在设备上生成
print("after to_empty and reset_parameters:", big[0].weight.device)
bound, weight = 1 / 1024**0.5, big[0].weight  # nn.Linear 的界限：1/sqrt(n)，n 为输入个数
within = bool(weight.abs().max() <= bound)
spread = abs(weight.std().item() * 3**0.5 / bound - 1) < 0.01  # 均匀分布的标准差：bound/sqrt(3)
print("first layer's weights are drawn as nn.Linear draws them:", within and spread)

# %% [markdown]
# 加载检查点是给这种模型填上数值的另一种办法。下一个单元格在 CPU 上搭一个形状相同的孪生模型，把它的权重加载进来；`load_state_dict` 会把每个张量复制到模型里对应张量所在的设备上。然后让两者计算同一个输入，检查输出是否一致。
#
# 一致到什么程度才算一致？在 CPU 上，两次运行是完全相同的计算。在 GPU 上，核函数累加乘积的顺序不同；float32 只有大约七位有效数字，累加顺序一变，最后几位就会跟着变。CUDA GPU 上的 float32 矩阵乘法默认按完整的 float32 精度计算，除非打开了 TF32（见第 [12](12-remedies.ipynb) 课），所以绝对容差取 1e-5，足以容纳累加顺序带来的差别，而权重一旦出错就通不过。这个单元格还没有在 GPU 上运行过。

# %%
torch.manual_seed(0)
twin = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))  # 建在 CPU 上
big.load_state_dict(twin.state_dict())  # 把每个张量复制到 big 中对应张量所在的设备上
x = torch.randn(8, 1024)
same = torch.allclose(big(x.to(device)).cpu(), twin(x), atol=1e-5)  # 为累加顺序留出余地
print("with the twin's weights loaded, the outputs equal the CPU twin's:", same)

# %% [markdown]
# ## 本课小结
#
# - 带调度的 `torch.profiler` 在预热之后记录几步训练，初始开销不会混进记录里。`key_averages()` 按名字汇总记录：执行了什么、执行了几次、各自的自身时间是多少。
# - 在 CPU 上，表里列的是计算本身。在 CUDA GPU 上，表里按 GPU 时间列出 GPU 执行的核函数和复制，CPU 这一侧的行则是启动核函数和等待：`.item()` 和每次从普通内存复制的背后，都有一次 `cudaStreamSynchronize`。
# - `with torch.device(device):` 让张量和层一开始就建在设备上。meta 设备能搭出只有形状、不占存储的模型；再用 `to_empty` 加 `reset_parameters()`，或者加载一个检查点，就能在要运行的设备上真正分配存储并初始化。
#
# 下一课：[11 – 三种瓶颈](11-three-limits.ipynb)，讲什么在限制一个 GPU 程序：算力、显存带宽，还是开销。
