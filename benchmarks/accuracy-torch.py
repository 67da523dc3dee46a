#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The pipelining tutorial's recipe in plain PyTorch on the CPU, as an
independent reference for infeed-train's test accuracy.

Same network (B1 conv 1->10 k5, pool 2, ReLU; B2 conv 10->20 k5, pool 2,
ReLU; B3 linear 320->256, ReLU; B4 linear 256->10), same data (Debian's
Fashion-MNIST, scaled to [0, 1] and normalised with mean 0.2860, std
0.3530), same optimiser (AdamW, weight decay 0.01).  One weight update
takes batch x gradient-accumulation samples with the mean loss, which is
what PopTorch's Mean reduction computes (replicas only split that batch);
pipelining does not change the maths.  Prints one JSON line per run.
Seeds are comma-separated here; benchmarks/accuracy takes "0 1 2".

    benchmarks/accuracy-torch.py [--seeds 0,1,2] [--learning-rate X]
        [--batch-size B] [--gradient-accumulation M] [--device-iterations D]
        [--epochs N] [--schedule constant|cosine|onecycle]

Needs python3-torch and python3-numpy (Debian 12); not part of the build.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "examples"))
from tutorial_net import MEAN, STD, load_idx, network  # noqa: E402


def load(split):
    images = load_idx(f"{split}-images-idx3-ubyte.gz").astype(np.float32)
    labels = load_idx(f"{split}-labels-idx1-ubyte.gz").astype(np.int64)
    x = torch.from_numpy((images / 255.0 - MEAN) / STD).unsqueeze(1)
    return x, torch.from_numpy(labels)


def run(seed, opts, train, test):
    torch.manual_seed(seed)
    model = network()
    optim = torch.optim.AdamW(model.parameters(), lr=opts.learning_rate,
                              weight_decay=0.01)
    update = opts.batch_size * opts.gradient_accumulation
    # PopTorch changes the learning rate between host calls (setOptimizer),
    # so the schedule steps once per device_iterations updates.
    calls = len(train[0]) // (update * opts.device_iterations)
    steps = calls * opts.device_iterations
    sched = None
    if opts.schedule == "onecycle":
        sched = torch.optim.lr_scheduler.OneCycleLR(
            optim, max_lr=opts.learning_rate, total_steps=calls * opts.epochs)
    elif opts.schedule == "cosine":
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(
            optim, T_max=calls * opts.epochs)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(seed)
    start = time.time()
    for _ in range(opts.epochs):
        order = torch.randperm(len(train[0]), generator=gen)
        model.train()
        for s in range(steps):
            idx = order[s * update:(s + 1) * update]
            optim.zero_grad()
            loss = loss_fn(model(train[0][idx]), train[1][idx])
            loss.backward()
            optim.step()
            if sched and (s + 1) % opts.device_iterations == 0:
                sched.step()
    model.eval()
    with torch.no_grad():
        hits = (model(test[0]).argmax(1) == test[1]).sum().item()
    return {"seed": seed, "learning_rate": opts.learning_rate,
            "batch_size": opts.batch_size,
            "gradient_accumulation": opts.gradient_accumulation,
            "epochs": opts.epochs, "schedule": opts.schedule,
            "updates": steps * opts.epochs,
            "train_loss": round(loss.item(), 6),
            "test_accuracy": hits / len(test[0]),
            "seconds": round(time.time() - start, 1)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="0")
    p.add_argument("--learning-rate", type=float, default=0.001)
    p.add_argument("--batch-size", type=int, default=40)
    p.add_argument("--gradient-accumulation", type=int, default=10)
    p.add_argument("--device-iterations", type=int, default=10)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--schedule", choices=["constant", "cosine", "onecycle"],
                   default="constant")
    opts = p.parse_args()
    torch.set_num_threads(2)
    train, test = load("train"), load("t10k")
    for seed in [int(s) for s in opts.seeds.split(",")]:
        print(json.dumps(run(seed, opts, train, test)), flush=True)


if __name__ == "__main__":
    main()
