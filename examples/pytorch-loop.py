#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A PyTorch training loop fed by infeed.DataLoader, then by torch's.

A small network (784-128-10) trained on the CPU for one epoch of
Fashion-MNIST, batch 64, Adam: once with its batches
from infeed.DataLoader (infeedd's fashion-mnist-train, scaled and
normalised by infeedd's workers), once from torch.utils.data.DataLoader over
the same images, scaled and normalised per sample in a Dataset as
torchvision's ToTensor() and Normalize() do, with one worker process.  The
same seed gives both the same initial weights.  For each it prints the
loop's time, the part of it spent waiting for data (in the iterator's
next()) and the test accuracy after training.

    examples/pytorch-loop.py [--loader both|infeed|torch] [--epochs 1]
        [--batch-size 64] [--steps N] [--threads T] [--torch-workers W]
        [--socket PATH] [--json]

infeed needs a running infeedd with the default catalogue (Debian's
dataset-fashion-mnist); torch's loader reads the same files itself.  Run
with /usr/bin/python3 (numpy and torch); from the source tree put
build/python on PYTHONPATH.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

import infeed

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tutorial_net import MEAN, STD, load_idx  # noqa: E402

NORMALISE = {"to_float32": True, "scale": 1 / 255, "mean": MEAN, "std": STD}


class FashionMNIST(torch.utils.data.Dataset):
    """Debian's Fashion-MNIST files as torchvision reads them: uint8 images
    in memory, each sample scaled to [0, 1] and normalised when read."""

    def __init__(self, split):
        images = load_idx(f"{split}-images-idx3-ubyte.gz")
        self.images = torch.from_numpy(images.copy()).unsqueeze(1)
        self.labels = torch.from_numpy(
            load_idx(f"{split}-labels-idx1-ubyte.gz").astype(np.int64))

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = self.images[i].float().div_(255).sub_(MEAN).div_(STD)
        return x, self.labels[i]


def network():
    """A small network: one epoch takes seconds on a CPU core."""
    return nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def infeed_loaders(a):
    """infeed's loaders: a dataset name from infeedd's catalogue."""
    train = infeed.DataLoader(infeed.Options().randomSeed(a.seed),
                              "fashion-mnist-train", batch_size=a.batch_size,
                              shuffle=True, socket=a.socket,
                              client_name="pytorch-loop", **NORMALISE)
    test = infeed.DataLoader(None, "fashion-mnist-test", batch_size=1000,
                             drop_last=False, socket=a.socket,
                             client_name="pytorch-loop", **NORMALISE)
    return train, test


def torch_loaders(a):
    """torch's loaders over the same files."""
    gen = torch.Generator().manual_seed(a.seed)
    train = torch.utils.data.DataLoader(
        FashionMNIST("train"), batch_size=a.batch_size, shuffle=True,
        drop_last=True, generator=gen, num_workers=a.torch_workers,
        persistent_workers=a.torch_workers > 0)
    test = torch.utils.data.DataLoader(FashionMNIST("t10k"), batch_size=1000)
    return train, test


def run(a, name):
    """Train and test with loader @name; a dict of what was measured."""
    train, test = (infeed_loaders if name == "infeed" else torch_loaders)(a)
    torch.manual_seed(a.seed)
    model = network()
    optim = torch.optim.Adam(model.parameters(), lr=a.learning_rate)
    loss_fn = nn.CrossEntropyLoss()
    steps = int(a.steps or len(train))
    waited = 0.0
    start = time.perf_counter()
    model.train()
    for _ in range(a.epochs):
        it = iter(train)
        for _ in range(min(steps, len(train))):
            t = time.perf_counter()
            data, labels = next(it)          # the wait for data
            waited += time.perf_counter() - t
            optim.zero_grad()
            loss_fn(model(data), labels).backward()
            optim.step()
        del it
    loop = time.perf_counter() - start
    model.eval()
    hits = total = 0
    with torch.no_grad():
        for data, labels in test:
            hits += (model(data).argmax(1) == labels).sum().item()
            total += len(labels)
    if name == "infeed":
        train.terminate()
        test.terminate()
    return {"loader": name, "epochs": a.epochs, "steps": steps,
            "batch_size": a.batch_size, "loop_s": round(loop, 3),
            "data_wait_s": round(waited, 3),
            "test_accuracy": round(hits / total, 4), "tested": total}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loader", choices=["both", "infeed", "torch"],
                   default="both")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=0,
                   help="steps per epoch (default: the whole epoch)")
    p.add_argument("--learning-rate", type=float, default=0.001)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int,
                   default=max(1, (os.cpu_count() or 2) // 2),
                   help="torch's threads (default: half the CPUs; the "
                   "other half prepares data)")
    p.add_argument("--torch-workers", type=int, default=1,
                   help="torch DataLoader's worker processes")
    p.add_argument("--socket", help="infeedd's socket (default: "
                   "$INFEED_SOCKET or /run/infeed/infeedd.sock)")
    p.add_argument("--json", action="store_true",
                   help="one JSON line per loader")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    names = ["infeed", "torch"] if a.loader == "both" else [a.loader]
    if not a.json:
        steps = a.steps or 60000 // a.batch_size
        print(f"Fashion-MNIST: {a.epochs} epoch{'s' if a.epochs > 1 else ''}"
              f" of {steps} steps of {a.batch_size} images, a 784-128-10 "
              f"network, {a.threads} torch thread{'s' if a.threads > 1 else ''}"
              f"; torch's DataLoader with {a.torch_workers} worker process"
              f"{'es' if a.torch_workers != 1 else ''}", flush=True)
        print(f"{'loader':<30}{'loop':>8}{'waited for data':>22}"
              f"{'test accuracy':>16}", flush=True)
    for name in names:
        r = run(a, name)
        if a.json:
            print(json.dumps(r), flush=True)
            continue
        label = ("infeed.DataLoader" if name == "infeed" else
                 "torch.utils.data.DataLoader")
        share = 100 * r["data_wait_s"] / r["loop_s"]
        print(f"{label:<30}{r['loop_s']:>7.1f}s"
              f"{r['data_wait_s']:>12.2f} s ({share:4.1f} %)"
              f"{r['test_accuracy']:>16.3f}", flush=True)


if __name__ == "__main__":
    main()
