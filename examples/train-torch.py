#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""train-torch: a small PyTorch training job, one process per rank, profiled by npuprof.

A convolutional network learns to classify noisy 28x28 images on the CPU, data-parallel
(torch.distributed over gloo, DistributedDataParallel) when --world is above 1: the ranks
meet at the start and every step all-reduces their gradients, as a real job's ranks do.
The loop runs inside npuprof.torch.ProfilerWindow, so each window the node's npuprofd
opens records torch.profiler's trace of the model's own operators (torch_trace.json)
beside libnpuprof's (trace.json); with libnpuprof-heap.so preloaded and profile_memory
in the configuration, the window's allocations too (memory_snapshot.json).

--step-ms pads each step with a wait to at least that long, as a rank waits for its input
pipeline or its device: the steps of a demo last long enough to be watched.

    NPUPROF_LIB=build/libnpuprof.so PYTHONPATH=python \\
    python3 examples/train-torch.py --rank R --world N --rendezvous FILE --steps N [--step-ms MS]

Prints one line at the end: "rank R: N steps done (median step T ms, longest L ms: step K;
loss A -> B); window STATE in DIR", a step's time counted from the win.step() that begins it
(where a window opens or closes) to the next. A rank whose partners never come gives up
after --timeout seconds.
"""

import argparse
import datetime
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import npuprof.torch


class Net(nn.Module):
    """Two convolutions and two linear layers: the shape of MNIST's classic example."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, default=1, help="how many ranks train together (default 1)")
    p.add_argument("--rendezvous", help="a file the ranks meet at (torch.distributed's file:// store)")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--step-ms", type=float, default=0, help="each step lasts at least this long (default 0)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--timeout", type=float, default=60, help="seconds to wait for the other ranks (default 60)")
    a = p.parse_args()
    if a.steps < 1 or a.world < 1 or not 0 <= a.rank < a.world or a.step_ms < 0 or a.batch < 1:
        p.error("--steps and --world from 1, --rank from 0 to world - 1, --step-ms not negative")
    if a.world > 1 and not a.rendezvous:
        p.error("--world above 1 needs --rendezvous FILE")

    torch.set_num_threads(1)            # the ranks share the node's cores
    torch.manual_seed(0)                # the same initial weights on every rank
    model = Net()
    if a.world > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="file://" + os.path.abspath(a.rendezvous), rank=a.rank,
                                world_size=a.world, timeout=datetime.timedelta(seconds=a.timeout))
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    # The data: ten classes, each a fixed random image (the same on every rank); a sample is
    # its class's image under noise, each rank drawing its own.
    protos = torch.randn(10, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(1000 + a.rank)
    first_loss = loss = None

    # begins[k]: when step k + 1 began, from the loop's point of view: before the win.step()
    # that begins it, where a window opens and closes.
    begins = [time.monotonic()]
    # Step 1 is the first iteration, as train-loop counts: win.step() begins the next one.
    with npuprof.torch.ProfilerWindow(rank=a.rank, first_step=1) as win:
        for step in range(1, a.steps + 1):
            start = time.monotonic()
            y = torch.randint(0, 10, (a.batch,), generator=gen)
            x = protos[y] + torch.randn(a.batch, 1, 28, 28, generator=gen)
            opt.zero_grad(set_to_none=True)
            out = F.cross_entropy(model(x), y)
            out.backward()
            opt.step()
            loss = out.item()
            first_loss = loss if first_loss is None else first_loss
            rest = a.step_ms / 1e3 - (time.monotonic() - start)
            if rest > 0:
                time.sleep(rest)
            begins.append(time.monotonic())
            if step < a.steps:
                win.step()
        info = win.info()
    took = sorted((t1 - t0, k) for k, (t0, t1) in enumerate(zip(begins, begins[1:]), 1))
    longest, at = took[-1]
    print("rank %d: %d steps done (median step %.1f ms, longest %.1f ms: step %d; loss %.3f -> %.3f); window %s%s%s" % (
        a.rank, a.steps, took[len(took) // 2][0] * 1e3, longest * 1e3, at, first_loss, loss, info.state,
        " in " if info.output else "", info.output))
    if info.message:
        print("rank %d: %s" % (a.rank, info.message))
    if a.world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
