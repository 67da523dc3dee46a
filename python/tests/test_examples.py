# SPDX-License-Identifier: MIT
"""The demo's PyTorch loop (examples/pytorch-loop.py) runs, in a quick mode,
against a real infeedd serving Debian's Fashion-MNIST: both loaders train,
the network learns, and the time waited for data is part of the loop's."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import Daemon

pytest.importorskip("torch")

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
FASHION = "/usr/share/datasets/fashion-mnist"
STEPS = 40


def fashion_mnist_catalogue():
    """The default catalogue's Fashion-MNIST sections
    (packaging/infeedd.conf), for the fixture daemon."""
    return "".join(
        f"\n[dataset fashion-mnist-{name}]\ntype = idx\n"
        f"images = {FASHION}/{split}-images-idx3-ubyte.gz\n"
        f"labels = {FASHION}/{split}-labels-idx1-ubyte.gz\n"
        for name, split in (("train", "train"), ("test", "t10k")))


def test_the_demos_pytorch_loop_trains_with_either_loader(tmp_path):
    if not os.path.exists(f"{FASHION}/train-images-idx3-ubyte.gz"):
        pytest.fail("Fashion-MNIST is missing: scripts/install-deps --tests "
                    "installs dataset-fashion-mnist")
    d = Daemon(tmp_path, fashion_mnist_catalogue())
    try:
        out = subprocess.run(
            [sys.executable, str(EXAMPLES / "pytorch-loop.py"), "--socket",
             d.socket, "--steps", str(STEPS), "--json"],
            capture_output=True, text=True, timeout=300)
    finally:
        rc = d.stop()
    assert out.returncode == 0, out.stderr
    assert rc == 0, d.log_text()
    runs = {r["loader"]: r for r in map(json.loads, out.stdout.splitlines())}
    assert sorted(runs) == ["infeed", "torch"]
    for r in runs.values():
        assert r["steps"] == STEPS and r["batch_size"] == 64
        assert r["tested"] == 10000
        # Ten classes: chance is 0.1; 40 steps of 64 get well past it.
        assert r["test_accuracy"] > 0.5, r
        assert 0 <= r["data_wait_s"] <= r["loop_s"], r


def test_the_demos_pytorch_loop_prints_its_table(tmp_path):
    """What the demo shows: one row per loader, waited beside the loop."""
    d = Daemon(tmp_path, fashion_mnist_catalogue())
    try:
        out = subprocess.run(
            [sys.executable, str(EXAMPLES / "pytorch-loop.py"), "--socket",
             d.socket, "--steps", "5", "--loader", "infeed"],
            capture_output=True, text=True, timeout=300)
    finally:
        d.stop()
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "waited for data" in lines[1] and "test accuracy" in lines[1]
    assert lines[2].startswith("infeed.DataLoader")
    assert len(lines) == 3
