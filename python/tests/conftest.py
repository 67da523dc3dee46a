# SPDX-License-Identifier: MIT
"""Fixtures: a real infeedd (meson passes $INFEEDD) on a private socket in
a temporary directory, serving datasets whose bytes say which sample they
are, so a test can check every row against its index."""

import os
import pathlib
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
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
        """Stop infeedd and return its exit status; fail if one of its
        processes crashed: the pool replaces a crashed worker and runs its
        job again, so the test itself may not see it."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGCONT)
        self.proc.terminate()
        rc = self.proc.wait(timeout=30)
        self.proc = None
        crash = self.crash_line()
        assert crash is None, f"a process of infeedd crashed: {crash}"
        return rc

    def crash_line(self):
        """The first line of the log with a mark of tests/crash-marks
        (its header says how they count), or None."""
        with open(os.environ["INFEED_CRASH_MARKS"]) as f:
            marks = [m.rstrip("\n") for m in f
                     if m.strip() and not m.startswith("#")]
        for line in self.log_text().splitlines():
            for m in marks:
                if m in line and (not m.startswith("(") or
                                  "killed by signal" in line):
                    return line
        return None

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def log_text(self):
        return self.log.read_text(errors="replace")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "no_group_window: the daemon's shared groups keep no "
        "window of past steps (group_window = 0): their rings have "
        "buffer_size slots, as the test counts on")
    config.addinivalue_line(
        "markers", "group_window: the daemon's shared groups keep 1G of "
        "past steps on any dataset (group_window = 1G; the default, auto, "
        "keeps a window only for groups that decode images)")
    config.addinivalue_line(
        "markers", "group_linger: the daemon's image groups keep a store "
        "of past steps that lingers 30 s (group_linger = auto, also the "
        "default)")


def window_conf(request):
    """The daemon's config line for the test's group_window marks."""
    if request.node.get_closest_marker("no_group_window"):
        return "group_window = 0\n"
    if request.node.get_closest_marker("group_window"):
        return "group_window = 1G\n"
    return ""


@pytest.fixture
def daemon(tmp_path, request):
    d = Daemon(tmp_path, window_conf(request))
    yield d
    rc = d.stop()
    assert rc == 0, f"infeedd did not exit cleanly ({rc}):\n{d.log_text()}"


@pytest.fixture
def metrics_daemon(tmp_path, request):
    """infeedd with metrics on a free port, and a slow dataset."""
    d = Daemon(tmp_path, window_conf(request) +
               "metrics_listen = 127.0.0.1:0\n"
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


def open_to_others(path):
    """Let other users reach @path: its directories up to /tmp (pytest's
    are 0700) get read and search bits for everyone."""
    d = pathlib.Path(path)
    while str(d) not in ("/", "/tmp"):
        os.chmod(d, os.stat(d).st_mode | 0o055)
        d = d.parent


class Nobody:
    """Runs Python code as the user nobody with the infeed package under
    test importable, wherever the checkout lies: the built package and the
    libinfeed it loads are copied into the test's directory, which is
    opened to others (a checkout in a 0700 home directory is closed to
    nobody, and a test must not depend on where the user cloned)."""

    UID = GID = 65534

    def __init__(self, tmp):
        import infeed
        self.site = tmp / "site-for-nobody"
        pkg = pathlib.Path(infeed.__file__).resolve().parent
        shutil.copytree(pkg, self.site / "python" / "infeed",
                        ignore=shutil.ignore_patterns("__pycache__", "*.p"))
        # The extension finds libinfeed at $ORIGIN/../../client when built.
        lib = pkg.parent.parent / "client"
        if lib.is_dir():
            (self.site / "client").mkdir()
            for so in lib.glob("libinfeed.so*"):
                if so.is_dir():
                    continue
                shutil.copy(so, self.site / "client" / so.name)
        for root, dirs, files in os.walk(self.site):
            for name in dirs + files:
                p = os.path.join(root, name)
                os.chmod(p, os.stat(p).st_mode | 0o044 |
                         (0o011 if os.path.isdir(p) else 0))
        open_to_others(self.site)

    def run(self, code):
        """Run @code as nobody; the CompletedProcess, text captured."""
        def drop():
            os.setgid(self.GID)
            os.setgroups([])
            os.setuid(self.UID)
        env = dict(os.environ, PYTHONPATH=str(self.site / "python"))
        return subprocess.run([sys.executable, "-c", code], preexec_fn=drop,
                              env=env, capture_output=True, text=True,
                              cwd="/")


@pytest.fixture
def nobody(tmp_path):
    """Code run as another user; needs root."""
    if os.getuid() != 0:
        pytest.skip("needs root to run a process as another user")
    return Nobody(tmp_path)


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
