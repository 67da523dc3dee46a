#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The efficient-data-loading tutorial's loop in Python, through infeed.

The tutorial's dataset (10000 samples of [1, 128, 128] float32: infeedd's
tutorial-synthetic), micro-batch 16, 50 device iterations and 1 or 4
replicas: each item is one device step of 800 (or 3200) samples.  Like the
tutorial, it touches every step (here a sum, as a copy to the device would
read it), prints the throughput of each epoch and then the mean.

    examples/dataloading.py [--replicas 1] [--epochs 5] [--dataset NAME]
        [--socket PATH]
"""
import argparse
import time

import infeed


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="tutorial-synthetic")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--device-iterations", type=int, default=50)
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--socket", help="infeedd's socket (default: "
                   "$INFEED_SOCKET or /run/infeed/infeedd.sock)")
    a = p.parse_args()
    opts = infeed.Options().deviceIterations(a.device_iterations)
    opts.replicationFactor(a.replicas)
    loader = infeed.DataLoader(opts, a.dataset, batch_size=a.batch_size,
                               shuffle=True, socket=a.socket,
                               client_name="dataloading-example")
    print(f"{a.dataset}: {len(loader)} steps of {loader.combinedBatchSize} "
          f"samples {loader.info['sample_shape']} per epoch", flush=True)
    rates = []
    for epoch in range(a.epochs):
        start = time.perf_counter()
        items = 0
        for data, labels in loader:
            data.sum()          # every byte read once, as a copy would
            items += len(labels)
        rates.append(items / (time.perf_counter() - start))
        print(f"epoch {epoch}: {rates[-1]:,.0f} items/s", flush=True)
    print(f"Mean throughput: {sum(rates) / len(rates):,.0f} items/s")


if __name__ == "__main__":
    main()
