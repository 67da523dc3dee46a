# SPDX-License-Identifier: MIT
"""Distributed shares under mpirun: each process takes its process id and
count from OMPI_COMM_WORLD_RANK/_SIZE, as poptorch.Options does, and the
processes' shares are disjoint and cover the epoch."""

import os
import shutil
import subprocess
import sys

import pytest

import infeed  # noqa: F401  (the package must import before mpirun runs it)

np = pytest.importorskip("numpy")

SCRIPT = """
import sys
import numpy as np
import infeed
opts = infeed.Options()
loader = infeed.DataLoader(opts, "raw", batch_size=7, shuffle=True,
                           output="numpy", socket=sys.argv[1], seed=3)
got = np.concatenate([s.indices for s in loader])
rank = opts.Distributed.processId
np.save(f"{sys.argv[2]}/share-{rank}.npy", got)
print(rank, opts.Distributed.numProcesses, len(loader), flush=True)
"""


@pytest.mark.skipif(shutil.which("mpirun") is None,
                    reason="needs Debian's openmpi-bin")
def test_mpirun_processes_get_disjoint_shares_of_the_epoch(daemon, tmp_path):
    script = tmp_path / "share.py"
    script.write_text(SCRIPT)
    cmd = ["mpirun", "-n", "2", "--oversubscribe", "--mca", "btl",
           "self,vader", "--mca", "plm_rsh_agent", ""]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    env = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE"):
        env.pop(k, None)
    out = subprocess.run(cmd + [sys.executable, str(script), daemon.socket,
                                str(tmp_path)],
                         capture_output=True, text=True, timeout=120,
                         env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    reports = sorted(line.split() for line in out.stdout.splitlines())
    assert [r[:2] for r in reports] == [["0", "2"], ["1", "2"]]
    steps = int(reports[0][2])
    a = np.load(tmp_path / "share-0.npy")
    b = np.load(tmp_path / "share-1.npy")
    assert len(a) == len(b) == steps * 7
    assert not set(a.tolist()) & set(b.tolist())
    # drop_last leaves out fewer samples than one step of both processes.
    assert 1000 - 2 * 7 < len(a) + len(b) <= 1000
