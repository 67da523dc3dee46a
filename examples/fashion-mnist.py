#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Fashion-MNIST trained in PyTorch on the CPU, fed by infeed or by torch.

The pipelining tutorial's network (examples/tutorial_net.py) with the tuned
recipe (micro-batch 8, gradient accumulation 8, 10 device iterations,
AdamW, one-cycle learning rate to 0.005, 3 epochs), fed one device step at a
time either by infeed.DataLoader from infeedd's fashion-mnist-train and
fashion-mnist-test datasets (normalised by infeedd's workers) or by
torch.utils.data.DataLoader over the same IDX files, normalised the same
way.  Each run prints one JSON line: test accuracy, and the seconds the
training loop waited for its data (time blocked in the loader).

    examples/fashion-mnist.py --loader infeed|torch [--seeds 0,1,2]
        [--epochs 3] [--socket PATH]

infeed needs a running infeedd with the default catalogue (Debian's
dataset-fashion-mnist).  Run with /usr/bin/python3 (numpy and torch).
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
from tutorial_net import MEAN, STD, load_idx, network  # noqa: E402


def torch_loaders(a, seed):
    """torch's DataLoaders over the IDX files: whole device steps."""
    def dataset(split):
        x = load_idx(f"{split}-images-idx3-ubyte.gz").astype(np.float32)
        y = load_idx(f"{split}-labels-idx1-ubyte.gz").astype(np.int64)
        x = torch.from_numpy((x / 255.0 - MEAN) / STD).unsqueeze(1)
        return torch.utils.data.TensorDataset(x, torch.from_numpy(y))
    gen = torch.Generator().manual_seed(seed)
    train = torch.utils.data.DataLoader(
        dataset("train"), batch_size=a.batch_size * a.device_iterations *
        a.gradient_accumulation, shuffle=True, drop_last=True, generator=gen)
    test = torch.utils.data.DataLoader(dataset("t10k"), batch_size=1000)
    return train, test


def infeed_loaders(a, seed):
    """infeed's DataLoaders: infeedd's workers normalise the samples."""
    norm = {"to_float32": True, "scale": 1 / 255, "mean": MEAN, "std": STD}
    opts = infeed.Options().deviceIterations(a.device_iterations)
    opts.Training.gradientAccumulation(a.gradient_accumulation)
    opts.randomSeed(seed)
    train = infeed.DataLoader(opts, "fashion-mnist-train",
                              batch_size=a.batch_size, shuffle=True,
                              socket=a.socket, client_name="fashion-mnist",
                              **norm)
    test = infeed.DataLoader(infeed.Options(), "fashion-mnist-test",
                             batch_size=1000, drop_last=False,
                             socket=a.socket, client_name="fashion-mnist",
                             **norm)
    return train, test


def timed(loader, waited):
    """Iterate @loader, adding the time blocked in it to waited[0]."""
    it = iter(loader)
    while True:
        t = time.perf_counter()
        try:
            item = next(it)
        except StopIteration:
            waited[0] += time.perf_counter() - t
            return
        waited[0] += time.perf_counter() - t
        yield item


def run(a, seed):
    train, test = (infeed_loaders if a.loader == "infeed" else
                   torch_loaders)(a, seed)
    torch.manual_seed(seed)
    model = network()
    optim = torch.optim.AdamW(model.parameters(), lr=a.learning_rate,
                              weight_decay=0.01)
    update = a.batch_size * a.gradient_accumulation
    sched = torch.optim.lr_scheduler.OneCycleLR(
        optim, max_lr=a.learning_rate, total_steps=len(train) * a.epochs)
    loss_fn = nn.CrossEntropyLoss()
    waited = [0.0]
    start = time.time()
    for _ in range(a.epochs):
        model.train()
        for data, labels in timed(train, waited):
            # One device step: device_iterations weight updates.
            for i in range(a.device_iterations):
                rows = slice(i * update, (i + 1) * update)
                optim.zero_grad()
                loss = loss_fn(model(data[rows]), labels[rows])
                loss.backward()
                optim.step()
            sched.step()
    model.eval()
    hits = total = 0
    with torch.no_grad():
        for data, labels in test:
            hits += (model(data).argmax(1) == labels).sum().item()
            total += len(labels)
    return {"loader": a.loader, "seed": seed, "epochs": a.epochs,
            "test_accuracy": hits / total, "samples_tested": total,
            "data_wait_s": round(waited[0], 3),
            "seconds": round(time.time() - start, 1)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loader", choices=["infeed", "torch"], default="infeed")
    p.add_argument("--seeds", default="0")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--learning-rate", type=float, default=0.005)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--gradient-accumulation", type=int, default=8)
    p.add_argument("--device-iterations", type=int, default=10)
    p.add_argument("--socket", help="infeedd's socket (default: "
                   "$INFEED_SOCKET or /run/infeed/infeedd.sock)")
    a = p.parse_args()
    torch.set_num_threads(2)
    for seed in [int(s) for s in a.seeds.split(",")]:
        print(json.dumps(run(a, seed)), flush=True)


if __name__ == "__main__":
    main()
