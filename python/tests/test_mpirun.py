# SPDX-License-Identifier: MIT
"""Distributed shares under mpirun: each process takes its process id and
count from OMPI_COMM_WORLD_RANK/_SIZE, as poptorch.Options does, and the
processes' shares are disjoint and cover the epoch."""

import json
import os
import shutil
import subprocess
import sys

import pytest

import infeed  # noqa: F401  (the package must import before mpirun runs it)
from conftest import N

np = pytest.importorskip("numpy")

BATCH = 7
# Generous: two Python processes importing numpy take well under a second
# here, even with the 2 cores busy; mpirun itself starts in milliseconds.
TIMEOUT = 180

SCRIPT = """
import json, sys
import numpy as np
import infeed
opts = infeed.Options()             # no process id: mpirun's variables give it
loader = infeed.DataLoader(opts, "raw", batch_size=%d, shuffle=True,
                           output="numpy", seed=3, **json.loads(sys.argv[1]))
got = np.concatenate([s.indices for s in loader])
rank = opts.Distributed.processId
np.save(f"{sys.argv[2]}/share-{rank}.npy", got)
# A file, not stdout: mpirun interleaves the processes' output.
with open(f"{sys.argv[2]}/share-{rank}.txt", "w") as f:
    print(rank, opts.Distributed.numProcesses, len(loader), file=f)
""" % BATCH


def mpirun(n, argv, **kw):
    """mpirun -n N ARGV, set up for a container: one host, no ssh or rsh
    (plm_rsh_agent ""), shared memory between the processes and no network
    transport (btl self,vader), root allowed (CI runs as root), more
    processes than cores allowed (2-core machines)."""
    cmd = ["mpirun", "-n", str(n), "--oversubscribe",
           "--mca", "plm_rsh_agent", "", "--mca", "btl", "self,vader"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    # Not the launcher's nor torchrun's variables of a surrounding job.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    return subprocess.run(cmd + argv, capture_output=True, text=True,
                          timeout=TIMEOUT, env=env, **kw)


@pytest.mark.skipif(shutil.which("mpirun") is None,
                    reason="needs mpirun: apt-get install openmpi-bin")
def test_mpirun_processes_get_disjoint_shares_of_the_epoch(
        daemon, loader_args, tmp_path):
    # Can mpirun start anything here at all?  If not, that is the
    # machine's doing (no loopback, say), not infeed's.
    probe = mpirun(2, ["true"])
    if probe.returncode != 0:
        pytest.skip("mpirun cannot start processes here: " +
                    (probe.stderr or probe.stdout).strip()[-400:])

    script = tmp_path / "share.py"
    script.write_text(SCRIPT)
    out = mpirun(2, [sys.executable, str(script), json.dumps(loader_args),
                     str(tmp_path)])
    assert out.returncode == 0, out.stdout + out.stderr
    reports = sorted(p.read_text().split()
                     for p in tmp_path.glob("share-*.txt"))
    assert [r[:2] for r in reports] == [["0", "2"], ["1", "2"]], out.stdout
    steps = int(reports[0][2])
    assert steps == int(reports[1][2]) == N // (2 * BATCH)
    a = np.load(tmp_path / "share-0.npy")
    b = np.load(tmp_path / "share-1.npy")
    # Each process got every one of its steps whole ...
    assert len(a) == len(b) == steps * BATCH
    # ... no sample twice, within a share or across the two ...
    assert len(np.unique(np.concatenate([a, b]))) == 2 * steps * BATCH
    # ... and all of the epoch but drop_last's remainder, which is less
    # than one step of both processes.
    assert ((0 <= a) & (a < N)).all() and ((0 <= b) & (b < N)).all()
    assert N - 2 * BATCH < len(a) + len(b) <= N
