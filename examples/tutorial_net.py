# SPDX-License-Identifier: MIT
"""The pipelining tutorial's network and data, shared by
examples/fashion-mnist.py and benchmarks/accuracy-torch.py.

B1 conv 1->10 k5, pool 2, ReLU; B2 conv 10->20 k5, pool 2, ReLU; B3 linear
320->256, ReLU; B4 linear 256->10.  Fashion-MNIST is scaled to [0, 1] and
normalised with MEAN and STD; load_idx reads Debian's dataset-fashion-mnist.
"""
import gzip

import numpy as np
import torch.nn as nn

MEAN, STD = 0.2860, 0.3530
DATA = "/usr/share/datasets/fashion-mnist"


def load_idx(name):
    """One of the gzipped IDX files of DATA, as a numpy array."""
    with gzip.open(f"{DATA}/{name}", "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big")
            for i in range(ndim)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def network():
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 5), nn.MaxPool2d(2), nn.ReLU()]
    return nn.Sequential(*block(1, 10), *block(10, 20), nn.Flatten(),
                         nn.Linear(320, 256), nn.ReLU(), nn.Linear(256, 10))
