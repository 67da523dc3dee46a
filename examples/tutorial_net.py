# SPDX-License-Identifier: MIT
"""The pipelining tutorial's network and its one-cycle recipe, shared by
examples/fashion-mnist.py and benchmarks/accuracy-torch.py.

B1 conv 1->10 k5, pool 2, ReLU; B2 conv 10->20 k5, pool 2, ReLU; B3 linear
320->256, ReLU; B4 linear 256->10.  Fashion-MNIST is scaled to [0, 1] and
normalised with MEAN and STD.
"""
import torch.nn as nn

MEAN, STD = 0.2860, 0.3530


def network():
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 5), nn.MaxPool2d(2), nn.ReLU()]
    return nn.Sequential(*block(1, 10), *block(10, 20), nn.Flatten(),
                         nn.Linear(320, 256), nn.ReLU(), nn.Linear(256, 10))
