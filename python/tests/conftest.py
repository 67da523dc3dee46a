# SPDX-License-Identifier: MIT
"""Fixtures: a real infeedd (meson passes $INFEEDD) on a private socket in
a temporary directory, serving datasets whose bytes say which sample they
are, so a test can check every row against its index."""

import os
import re
import signal
import socket
import struct
import subprocess
import time

import pytest

N = 1000            # samples in the "raw" dataset
SHAPE = (1, 2, 2)   # float32: sample i is i + k/4 for k = 0..3
CLASSES = 10


def label_of(i):
    return (i * 7) % CLASSES


def write_raw(path_data, path_labels, n=N, label_fmt="q"):
    with open(path_data, "wb") as f:
        for i in range(n):
            f.write(struct.pack("4f", *(i + k / 4 for k in range(4))))
    with open(path_labels, "wb") as f:
        f.write(struct.pack(f"{n}{label_fmt}",
                            *(label_of(i) for i in range(n))))


class Daemon:
    """infeedd on a private socket; restartable, stoppable."""

    def __init__(self, tmp, extra="", workers=2):
        self.dir = tmp
        self.workers = workers
        self.socket = str(tmp / "infeedd.sock")
        self.conf = tmp / "infeedd.conf"
        self.log = tmp / "infeedd.log"
        write_raw(tmp / "raw.bin", tmp / "raw-labels.bin")
        self.conf.write_text(
            "[infeedd]\nworkers = 2\nmemory_budget = 256M\n" + extra +
            f"\n[dataset raw]\ntype = raw\npath = {tmp}/raw.bin\n"
            f"shape = 1,2,2\ndtype = float32\n"
            f"labels = {tmp}/raw-labels.bin\nlabel_dtype = int64\n"
            f"classes = {CLASSES}\n"
            f"\n[dataset images]\ntype = synthetic\nsamples = 300\n"
            f"shape = 1,8,8\ndtype = uint8\nclasses = 10\nseed = 7\n"
            f"\n[dataset private]\ntype = raw\npath = {tmp}/raw.bin\n"
            f"shape = 1,2,2\ndtype = float32\nallow_groups = root\n"
            f"labels = {tmp}/raw-labels.bin\nlabel_dtype = int64\n")
        self.proc = None
        self.start()

    def start(self, workers=None):
        if workers is not None:
            self.workers = workers
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [os.environ["INFEEDD"], "--config", str(self.conf), "--socket",
             self.socket, "--workers", str(self.workers)], stderr=logf)
        logf.close()
        for _ in range(500):
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(self.socket)
                return
            except OSError:
                time.sleep(0.01)
            finally:
                s.close()
        raise RuntimeError(f"infeedd did not start; see {self.log}")

    def stop(self):
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGCONT)
        self.proc.terminate()
        rc = self.proc.wait(timeout=30)
        self.proc = None
        return rc

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def log_text(self):
        return self.log.read_text(errors="replace")


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path)
    yield d
    rc = d.stop()
    assert rc == 0, f"infeedd did not exit cleanly ({rc}):\n{d.log_text()}"


@pytest.fixture
def metrics_daemon(tmp_path):
    """infeedd with metrics on a free port, and a slow dataset."""
    d = Daemon(tmp_path, "metrics_listen = 127.0.0.1:0\n"
               "\n[dataset slow]\ntype = synthetic\nsamples = 400\n"
               "shape = 1,4,4\ndtype = uint8\nsample_delay_us = 2000\n")
    for _ in range(100):
        m = re.search(r"metrics on http://127.0.0.1:(\d+)/metrics",
                      d.log_text())
        if m:
            break
        time.sleep(0.05)
    d.metrics_port = int(m.group(1))
    yield d
    rc = d.stop()
    assert rc == 0, f"infeedd did not exit cleanly ({rc}):\n{d.log_text()}"


@pytest.fixture
def loader_args(daemon):
    """Keyword arguments that point a DataLoader at the fixture daemon."""
    return {"socket": daemon.socket, "client_name": "pytest"}


def expected_data(indices):
    """What the rows of the "raw" dataset hold, from their indices."""
    import numpy as np
    idx = np.asarray(indices, dtype=np.float64).reshape(-1, 1)
    return (idx + np.arange(4) / 4).astype(np.float32).reshape(
        (-1,) + SHAPE)
