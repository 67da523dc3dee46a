# SPDX-License-Identifier: MIT
"""Elastic resume from Python (docs/python.md): a job of P processes saves
its state mid-epoch, and a job of P' processes resumes from it; every
process is its own Python process, with torchrun's RANK and WORLD_SIZE.
Over the epoch no index comes twice and every index comes but the
drop_last remainders of docs/protocol.md's rule; the next epoch is the
ordinary one for P'.  One run goes under mpirun as well."""

import json
import os
import shutil
import subprocess
import sys

import pytest

import infeed
from conftest import N
from test_mpirun import mpirun

np = pytest.importorskip("numpy")

SEED = 3
TIMEOUT = 180

# One process of a job: take `take` steps of the epoch (None: the rest),
# from `state` when given; print what it delivered, its state and len().
WORKER = """
import json, sys
import infeed
cfg = json.loads(sys.argv[1])
loader = infeed.DataLoader(infeed.Options(), "raw", batch_size=cfg["batch"],
                           shuffle=cfg["shuffle"], drop_last=cfg["drop_last"],
                           seed=%d, output="numpy", socket=cfg["socket"],
                           client_name="elastic")
if cfg["state"] is not None:
    loader.load_state_dict(cfg["state"])
out = {"len": len(loader), "indices": []}
for step in loader:
    out["indices"] += [int(i) for i in step.indices]
    if cfg["take"] is not None and len(out["indices"]) == \\
            cfg["take"] * loader.combinedBatchSize:
        break
out["state"] = loader.state_dict()
if cfg["next_epoch"]:
    out["next"] = [int(i) for s in loader for i in s.indices]
    fresh = infeed.DataLoader(infeed.Options(), "raw",
                              batch_size=cfg["batch"], shuffle=cfg["shuffle"],
                              drop_last=cfg["drop_last"], seed=%d,
                              output="numpy", socket=cfg["socket"])
    fresh.set_epoch(out["state"]["epoch"])
    out["fresh"] = [int(i) for s in fresh for i in s.indices]
if cfg.get("out"):       # under mpirun: a file per rank
    rank = infeed.Options().Distributed.processId
    with open(f"{cfg['out']}/{rank}.json", "w") as f:
        json.dump(out, f)
else:
    print(json.dumps(out))
""" % (SEED, SEED)


def job(daemon, count, batch, *, state=None, take=None, shuffle=True,
        drop_last=True, next_epoch=False):
    """Run @count processes at once; their outputs, by rank."""
    procs = []
    for rank in range(count):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(count))
        for k in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"):
            env.pop(k, None)
        cfg = {"batch": batch, "shuffle": shuffle, "drop_last": drop_last,
               "socket": daemon.socket, "state": state, "take": take,
               "next_epoch": next_epoch}
        procs.append(subprocess.Popen(
            [sys.executable, "-c", WORKER, json.dumps(cfg)], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=TIMEOUT)
        assert p.returncode == 0, err
        outs.append(json.loads(out))
    return outs


def same_state(outs):
    """Every process saved the same state; it, as JSON round-trips it."""
    states = [json.dumps(o["state"], sort_keys=True) for o in outs]
    assert len(set(states)) == 1, states
    return json.loads(states[0])


def block(m, count, p, cbs, drop_last):
    """(offset, length, steps) of process @p's block of a list of @m
    (docs/protocol.md, "Steps and the process's block")."""
    if drop_last:
        steps = m // (cbs * count)
        return p * steps * cbs, steps * cbs, steps
    q, r = divmod(m, count)
    steps = -(-(q + (1 if r else 0)) // cbs)
    return p * q + min(p, r), q + (1 if p < r else 0), steps


def delivered(stages, count, cbs, drop_last, m=N):
    """How many positions the finished @stages and then a current stage
    of @count processes of @cbs deliver, and that stage's steps."""
    total = 0
    for sp, sc, k in stages:
        left = 0
        for p in range(sp):
            _, length, _ = block(m, sp, p, sc, drop_last)
            done = min(k * sc, length)
            total += done
            left += length - done
        m = left
    steps = block(m, count, 0, cbs, drop_last)[2]
    total += sum(min(steps * cbs, block(m, count, p, cbs, drop_last)[1])
                 for p in range(count))
    return total, steps


def check_epoch(runs, stages, count, cbs, drop_last):
    """No index twice over the epoch's runs, and as many as the rule
    says: every index without drop_last."""
    got = [i for outs in runs for o in outs for i in o["indices"]]
    assert len(got) == len(set(got)), "an index came twice"
    want, steps = delivered(stages, count, cbs, drop_last)
    assert len(got) == want
    if not drop_last:
        assert sorted(got) == list(range(N))
    assert all(o["len"] == steps for o in runs[-1])


@pytest.mark.parametrize("shuffle,drop_last", [(True, True), (False, False)])
@pytest.mark.parametrize("count,batch", [(2, 7), (3, 7), (8, 7), (2, 5)])
def test_four_processes_resume_with_another_count(daemon, shuffle, drop_last,
                                                  count, batch):
    first = job(daemon, 4, 7, take=10, shuffle=shuffle, drop_last=drop_last)
    state = same_state(first)
    assert (state["epoch"], state["stages"], state["process_count"],
            state["combined_batch_size"], state["step"]) == (0, [], 4, 7, 10)
    rest = job(daemon, count, batch, state=state, shuffle=shuffle,
               drop_last=drop_last, next_epoch=True)
    check_epoch([first, rest], [[4, 7, 10]], count, batch, drop_last)
    for o in rest:      # the next epoch is the ordinary one for P'
        assert o["next"] == o["fresh"] and o["next"]
    assert same_state(rest)["epoch"] == 1


def mpirun_job(daemon, tmp, count, **cfg):
    """@count processes under mpirun (OMPI_COMM_WORLD_RANK/_SIZE)."""
    out = tmp / f"job-{count}-{len(list(tmp.iterdir()))}"
    out.mkdir()
    cfg = dict({"batch": 7, "shuffle": True, "drop_last": True,
                "socket": daemon.socket, "state": None, "take": None,
                "next_epoch": False}, **cfg, out=str(out))
    run = mpirun(count, [sys.executable, "-c", WORKER, json.dumps(cfg)])
    assert run.returncode == 0, run.stdout + run.stderr
    return [json.loads((out / f"{r}.json").read_text())
            for r in range(count)]


@pytest.mark.skipif(shutil.which("mpirun") is None,
                    reason="needs mpirun: apt-get install openmpi-bin")
def test_mpirun_four_then_two(daemon, tmp_path):
    if mpirun(2, ["true"]).returncode != 0:
        pytest.skip("mpirun cannot start processes here")
    first = mpirun_job(daemon, tmp_path, 4, take=10)
    rest = mpirun_job(daemon, tmp_path, 2, state=same_state(first),
                      next_epoch=True)
    check_epoch([first, rest], [[4, 7, 10]], 2, 7, True)
    for o in rest:
        assert o["next"] == o["fresh"] and o["next"]


def test_four_then_two_then_three_in_one_epoch(daemon):
    first = job(daemon, 4, 7, take=10)
    second = job(daemon, 2, 7, state=same_state(first), take=6)
    state = same_state(second)
    assert (state["stages"], state["process_count"], state["step"]) == \
        ([[4, 7, 10]], 2, 6)
    third = job(daemon, 3, 7, state=state)
    check_epoch([first, second, third], [[4, 7, 10], [2, 7, 6]], 3, 7, True)
    # With the same count again, the stage goes on where it was.
    again = job(daemon, 2, 7, state=state)
    check_epoch([first, second, again], [[4, 7, 10]], 2, 7, True)


def loader(daemon, process=(0, 1), seed=SEED, batch=7, shuffle=True, **kw):
    o = infeed.Options().randomSeed(seed)
    o.Distributed.configureProcessId(*process)
    return infeed.DataLoader(o, kw.pop("dataset", "raw"), batch_size=batch,
                             shuffle=shuffle, output="numpy",
                             socket=daemon.socket, **kw)


def take(ld, n):
    """Take @n steps of the next epoch, keeping none."""
    it = iter(ld)
    for _ in range(n):
        next(it)


def test_a_state_from_before_loads_with_the_same_count(daemon):
    ref = loader(daemon, (1, 2))
    want = [list(s.indices) for s in ref][5:]
    old = {"epoch": 0, "step": 5,
           "fingerprint": {"dataset": "raw", "combined_batch_size": 7,
                           "steps_per_epoch": ref.info["steps_per_epoch"],
                           "shuffle": True, "seed": SEED, "drop_last": True,
                           "process": [1, 2]}}
    resumed = loader(daemon, (1, 2))
    resumed.load_state_dict(old)
    assert len(resumed) == ref.info["steps_per_epoch"]
    assert [list(s.indices) for s in resumed] == want


def test_refusals_name_what_differs(daemon):
    ld = loader(daemon, (0, 4))
    take(ld, 3)
    state = ld.state_dict()
    for kw, word in (({"seed": SEED + 1}, "seed"),
                     ({"shuffle": False}, "shuffle"),
                     ({"drop_last": False}, "drop_last"),
                     ({"dataset": "images"}, "dataset")):
        with pytest.raises(ValueError, match=word):
            loader(daemon, (0, 2), **kw).load_state_dict(state)
    other = json.loads(json.dumps(state))
    other["fingerprint"]["transform"] = "Resize(8)"
    with pytest.raises(ValueError, match="transform"):
        loader(daemon, (0, 2)).load_state_dict(other)
    with pytest.raises(ValueError, match="not an infeed.DataLoader state"):
        loader(daemon).load_state_dict({"epoch": 0})
    # A stage the epoch cannot have had: the daemon refuses, naming it.
    bad = dict(state, stages=[[4, 7, 999]])
    with pytest.raises(infeed.InvalidArgumentError, match="stage"):
        loader(daemon, (0, 2)).load_state_dict(bad)
    many = dict(state, stages=[[4, 7, 1]] * 16)
    with pytest.raises(ValueError, match="at most 16"):
        loader(daemon, (0, 2)).load_state_dict(many)
    # The same process count and batch resume exactly, as before.
    same = loader(daemon, (0, 4))
    same.load_state_dict(state)
    assert len(same) == ld.info["steps_per_epoch"]
    assert same.state_dict() == state


def test_daemon_restart_within_the_elastic_epoch(daemon):
    """libinfeed re-attaches with the stages, counting the current stage's
    steps: the steps are those of an uninterrupted resume."""
    first = loader(daemon, (0, 4))
    take(first, 10)
    state = first.state_dict()
    first.close()

    def resumed():
        ld = loader(daemon, (1, 3), batch=9)
        ld.load_state_dict(state)
        return ld
    want = [list(s.indices) for s in resumed()]
    ld = resumed()
    assert len(ld) == len(want)
    it = iter(ld)
    got = [list(next(it).indices) for _ in range(4)]
    assert ld.state_dict()["stages"] == [[4, 7, 10]]
    assert daemon.stop() == 0
    daemon.start()
    got += [list(s.indices) for s in it]
    assert got == want
    # The next epoch is the ordinary one for 3 processes of 9.
    fresh = loader(daemon, (1, 3), batch=9)
    fresh.set_epoch(1)
    assert [list(s.indices) for s in ld] == [list(s.indices) for s in fresh]
