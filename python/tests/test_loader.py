# SPDX-License-Identifier: MIT
"""infeed.DataLoader against a real infeedd: the steps, their order and
exactly-once coverage, zero-copy lifetimes, state, epochs and errors."""

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import infeed
from conftest import (CLASSES, N, SHAPE, Daemon, expected_data, label_of,
                      open_to_others)

try:
    import numpy as np
except ImportError:
    np = None
try:
    import torch
except ImportError:
    torch = None

needs_numpy = pytest.mark.skipif(np is None, reason="needs python3-numpy")
needs_torch = pytest.mark.skipif(torch is None or np is None,
                                 reason="needs python3-torch")


def opts(di=1, replicas=1, ga=1, process=None, seed=None):
    o = infeed.Options().deviceIterations(di).replicationFactor(replicas)
    o.Training.gradientAccumulation(ga)
    o.Distributed.configureProcessId(*(process or (0, 1)))
    if seed is not None:
        o.randomSeed(seed)
    return o


def epoch_indices(loader):
    out = []
    for step in loader:
        out.append(np.asarray(step.indices).astype(np.int64).copy())
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def test_imports_without_numpy_or_torch():
    code = ("import sys; sys.modules['numpy'] = None; "
            "sys.modules['torch'] = None; import infeed; "
            "print(infeed.DataLoader.__name__, infeed.Options().device_iterations)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, env=os.environ)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["DataLoader", "1"]


def test_options_have_poptorch_names_and_chain():
    o = infeed.Options().deviceIterations(50).replicationFactor(4)
    o.Training.gradientAccumulation(2)
    o.Distributed.configureProcessId(1, 2)
    assert o.randomSeed(42) is o
    assert (o.device_iterations, o.replication_factor,
            o.Training.gradient_accumulation) == (50, 4, 2)
    assert (o.Distributed.processId, o.Distributed.numProcesses) == (1, 2)
    assert o.random_seed == 42
    with pytest.raises(ValueError, match="deviceIterations"):
        o.deviceIterations(0)
    with pytest.raises(ValueError, match="process_id"):
        o.Distributed.configureProcessId(2, 2)


@pytest.mark.parametrize("env,want", [
    ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "3"}, (1, 3)),
    ({"RANK": "2", "WORLD_SIZE": "4"}, (2, 4)),
    ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2",
      "RANK": "3", "WORLD_SIZE": "4"}, (0, 2)),
    ({}, (0, 1)),
])
def test_process_from_mpirun_or_torchrun(monkeypatch, env, want):
    for k in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "RANK",
              "WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    d = infeed.Options().Distributed
    assert (d.processId, d.numProcesses) == want


@needs_torch
def test_steps_are_poptorch_batches(loader_args):
    loader = infeed.DataLoader(opts(di=5, replicas=2, ga=2), "raw",
                               batch_size=4, **loader_args)
    assert loader.combinedBatchSize == 80
    assert len(loader) == N // 80
    info = loader.info
    assert info["sample_shape"] == SHAPE and info["dtype"] == "float32"
    count, third = 0, None
    for step in loader:         # steps kept past the ring would block
        if count == 0:
            data, labels = step
            assert isinstance(step, tuple) and len(step) == 2
            assert data.shape == (80,) + SHAPE
            assert data.dtype == torch.float32
            assert labels.dtype == torch.int64 and labels.shape == (80,)
            del data, labels
        if count == 3:
            third = step
        count += 1
    assert count == len(loader)
    assert third.epoch == 0 and third.step == 3
    idx = third.indices.numpy()
    assert (idx == np.arange(240, 320)).all()     # no shuffle: in order
    assert np.array_equal(third.data.numpy(), expected_data(idx))
    assert (third.labels.numpy() == [label_of(i) for i in idx]).all()
    # CrossEntropyLoss takes the labels as they come.
    loss = torch.nn.functional.cross_entropy(
        torch.zeros(80, CLASSES), third.labels)
    assert loss.item() > 0


@needs_numpy
@pytest.mark.parametrize("di,replicas,ga,processes,drop_last", [
    (1, 1, 1, 1, True), (5, 2, 1, 1, True), (3, 4, 2, 1, False),
    (2, 1, 3, 3, True), (7, 2, 1, 2, False),
])
def test_every_index_exactly_once_per_epoch(loader_args, di, replicas, ga,
                                            processes, drop_last):
    shares = []
    for p in range(processes):
        loader = infeed.DataLoader(
            opts(di, replicas, ga, (p, processes), seed=5), "raw",
            batch_size=3, shuffle=True, drop_last=drop_last,
            output="numpy", **loader_args)
        epochs = [epoch_indices(loader) for _ in range(2)]
        assert not np.array_equal(epochs[0], epochs[1])  # reshuffled
        shares.append(epochs)
        cbs = loader.combinedBatchSize
    for e in range(2):
        got = np.concatenate([s[e] for s in shares])
        assert len(np.unique(got)) == len(got), "an index came twice"
        if drop_last:
            assert len(got) == (N // (cbs * processes)) * cbs * processes
        else:
            assert len(got) == N


def test_same_steps_as_libinfeed(loader_args, daemon):
    dump = os.environ.get("INFEED_DUMP_STEPS")
    if dump is None or np is None:
        pytest.skip("meson sets INFEED_DUMP_STEPS; needs numpy")
    out = subprocess.run(
        [dump, "--socket", daemon.socket, "--dataset", "raw",
         "--batch-size", "4", "--device-iterations", "3", "--replicas", "2",
         "--shuffle", "--seed", "11", "--epochs", "2",
         "--process", "1,2"], capture_output=True, text=True, check=True)
    c_steps = [line.split() for line in out.stdout.splitlines()]
    loader = infeed.DataLoader(opts(3, 2, 1, (1, 2), seed=11), "raw",
                               batch_size=4, shuffle=True, output="numpy",
                               **loader_args)
    py_steps = []
    for _ in range(2):
        for s in loader:
            py_steps.append([str(s.epoch), str(s.step),
                             ",".join(str(i) for i in s.indices)])
    assert py_steps == c_steps


@needs_numpy
def test_state_dict_resumes_exactly(loader_args):
    def make():
        return infeed.DataLoader(opts(di=2, seed=3), "raw", batch_size=10,
                                 shuffle=True, output="numpy", **loader_args)
    ref = make()
    want = [s.indices.copy() for _ in range(2) for s in ref]
    loader = make()
    got = []
    it = iter(loader)
    for _ in range(7):
        got.append(next(it).indices.copy())
    state = loader.state_dict()
    assert (state["epoch"], state["step"]) == (0, 7)
    resumed = make()
    resumed.load_state_dict(state)
    got += [s.indices.copy() for s in resumed]     # the rest of epoch 0
    got += [s.indices.copy() for s in resumed]     # then epoch 1
    assert len(got) == len(want)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    # A state taken after the last step resumes at the next epoch.
    end = make()
    for _ in end:
        pass
    assert (end.state_dict()["epoch"], end.state_dict()["step"]) == (1, 0)
    other = infeed.DataLoader(opts(di=2, seed=4), "raw", batch_size=10,
                              shuffle=True, output="numpy", **loader_args)
    with pytest.raises(ValueError, match="seed"):
        other.load_state_dict(state)


@needs_numpy
def test_the_position_is_libinfeeds(loader_args):
    # The loader keeps no copy of where the session is: it asks libinfeed,
    # which says the epoch's last step went out before its EndOfData came.
    loader = infeed.DataLoader(opts(di=2), "raw", batch_size=10,
                               output="numpy", **loader_args)
    it = iter(loader)
    steps = len(loader)
    for _ in range(steps):
        next(it)
    st = loader._client.state()
    assert st["attached"] and st["end_of_data_owed"]
    assert (st["epoch"], st["step"]) == (1, 0)
    assert loader.state_dict()["epoch"] == 1
    assert list(it) == []                   # the EndOfData
    st = loader._client.state()
    assert not st["end_of_data_owed"] and (st["epoch"], st["step"]) == (1, 0)
    session = loader.info["session_id"]
    assert [s.epoch for s in loader] == [1] * steps
    assert loader.info["session_id"] == session     # the same session
    loader.close()
    assert not loader._client.state()["attached"]
    assert infeed._infeed.DTYPE_INT64 == infeed._infeed.dtype("int64")[0]


@needs_numpy
def test_set_epoch_gives_that_epochs_order(loader_args):
    a = infeed.DataLoader(opts(seed=9), "raw", batch_size=50, shuffle=True,
                          output="numpy", **loader_args)
    for _ in range(3):
        third = epoch_indices(a)
    b = infeed.DataLoader(opts(seed=9), "raw", batch_size=50, shuffle=True,
                          output="numpy", **loader_args)
    b.set_epoch(2)
    assert np.array_equal(epoch_indices(b), third)
    assert [s.epoch for s in b][0] == 3


@needs_torch
def test_kept_tensor_never_changes(loader_args):
    loader = infeed.DataLoader(opts(), "raw", batch_size=100,
                               buffer_size=3, **loader_args)
    it = iter(loader)
    kept = next(it)
    copy = kept.data.clone(), kept.labels.clone(), kept.indices.clone()
    for _ in range(3):      # several epochs: every slot refilled
        for s in it:
            pass
        it = iter(loader)
    assert torch.equal(kept.data, copy[0])
    assert torch.equal(kept.labels, copy[1])
    assert torch.equal(kept.indices, copy[2])


@needs_torch
def test_in_place_write_changes_only_that_step(loader_args):
    loader = infeed.DataLoader(opts(), "raw", batch_size=100,
                               buffer_size=2, **loader_args)
    other = infeed.DataLoader(opts(), "raw", batch_size=100,
                              buffer_size=2, **loader_args)
    for _ in range(2):
        for s, o in zip(loader, other):
            s.data.sub_(1000.0)             # on every step, every slot
            s.labels.fill_(-1)
            idx = s.indices.numpy()
            assert np.array_equal(s.data.numpy(), expected_data(idx) - 1000)
            assert np.array_equal(o.data.numpy(), expected_data(idx))
            assert (o.labels.numpy() == [label_of(i) for i in idx]).all()
    # The written slots come back with the daemon's bytes.
    for s in loader:
        idx = s.indices.numpy()
        assert np.array_equal(s.data.numpy(), expected_data(idx))


def daemons_step(s):
    """Assert torch step @s holds the daemon's data and labels; its
    indices as int64."""
    idx = s.indices.numpy().astype(np.int64)
    assert np.array_equal(s.data.numpy(), expected_data(idx))
    assert (s.labels.numpy() == [label_of(i) for i in idx]).all()
    return idx


@needs_torch
def test_writes_to_a_held_step_stay_while_other_slots_restore(loader_args):
    # Copy-on-write: the slots given back are restored when taken again,
    # one walk for several; the held step's own writes stay, and are
    # undone once it goes back.
    loader = infeed.DataLoader(opts(), "raw", batch_size=100,
                               buffer_size=3, **loader_args)
    it = iter(loader)
    held = next(it)
    want = held.indices.numpy().copy()
    held.data.fill_(-1.0)
    held.labels.fill_(-1)
    for s in it:
        daemons_step(s)
        s.data.add_(1000.0)
    assert (held.data.numpy() == -1).all()
    assert (held.labels.numpy() == -1).all()
    assert np.array_equal(held.indices.numpy(), want)
    del held, s
    for s in loader:
        daemons_step(s)


@needs_torch
def test_tensors_made_in_inference_mode_stay_in_it(loader_args):
    # Tensors are made ahead, several steps at a time: none made under
    # torch.inference_mode() (inference tensors, which autograd refuses)
    # may come out after it.
    loader = infeed.DataLoader(opts(), "raw", batch_size=100,
                               **loader_args)
    it = iter(loader)
    with torch.inference_mode():
        for _ in range(3):
            s = next(it)
    del s
    w = torch.ones(1, requires_grad=True)
    for s in it:
        for t in (s.data, s.labels, s.indices):
            assert not t.is_inference()
        (s.data * w).sum().backward()


@needs_torch
def test_torch_steps_follow_the_ring_across_a_daemon_restart(loader_args,
                                                            daemon):
    # A reconnect maps a new ring: no tensor made for the old one may
    # come out with a step of the new one.
    loader = infeed.DataLoader(opts(seed=2), "raw", batch_size=25,
                               shuffle=True, **loader_args)
    it = iter(loader)
    got = [daemons_step(next(it)) for _ in range(12)]
    kept = next(it)
    got.append(daemons_step(kept))
    assert daemon.stop() == 0
    daemon.start()
    got += [daemons_step(s) for s in it]
    assert np.array_equal(np.sort(np.concatenate(got)), np.arange(N))
    assert np.array_equal(kept.data.numpy(), expected_data(got[12]))


@needs_torch
def test_slot_returns_when_the_last_view_is_gone(loader_args):
    loader = infeed.DataLoader(opts(), "raw", batch_size=100,
                               buffer_size=2, **loader_args)
    it = iter(loader)
    view = next(it).data[3:5].view(-1)      # only a view of a view kept
    gc.collect()
    assert loader._client.held == 1
    next(it)                                # dropped at once
    assert loader._client.held == 1
    del view
    assert loader._client.held == 0


@needs_torch
def test_labels_alone_hold_the_slot_and_die_on_any_thread(loader_args):
    # data and labels are DLPack tensors over one lease: either keeps the
    # slot; the indices are a copy and keep nothing.
    loader = infeed.DataLoader(opts(), "raw", batch_size=100,
                               buffer_size=2, **loader_args)
    it = iter(loader)
    s = next(it)
    labels, indices = s.labels, s.indices
    want = [label_of(i) for i in indices.numpy()]
    del s
    gc.collect()
    assert loader._client.held == 1
    assert labels.tolist() == want
    box = [labels]
    del labels
    t = threading.Thread(target=box.pop)    # the last reference dies there
    t.start()
    t.join()
    assert loader._client.held == 0
    assert indices.dtype == torch.int64 and len(indices) == 100
    assert next(it).step == 1               # the flush of that release


@needs_torch
def test_indices_are_copied_at_the_first_look_and_pickle(loader_args):
    # A torch step copies its indices out of the slot only when they are
    # first read (the step holds the slot meanwhile), once; a pickle or
    # copy of a step has them, and holds no slot.
    import copy
    import pickle
    loader = infeed.DataLoader(opts(seed=4), "raw", batch_size=100,
                               shuffle=True, buffer_size=3, **loader_args)
    it = iter(loader)
    kept = next(it)
    for _ in range(6):                      # the other slots, refilled
        next(it)
    indices = kept.indices
    assert kept.indices is indices
    assert indices.dtype == torch.int64 and indices.shape == (100,)
    assert np.array_equal(kept.data.numpy(), expected_data(indices))
    pickled = pickle.loads(pickle.dumps(next(it)))
    copied = copy.copy(next(it))
    gc.collect()
    assert loader._client.held == 2         # kept and copied: same tensors
    assert np.array_equal(pickled.data.numpy(),
                          expected_data(pickled.indices))
    assert np.array_equal(copied.data.numpy(),
                          expected_data(copied.indices))
    want = indices.clone()
    del kept, copied
    for s in it:                            # every slot refilled
        pass
    assert torch.equal(indices, want)


@needs_torch
def test_the_epoch_iterator_ends_once_and_has_a_length(loader_args):
    loader = infeed.DataLoader(opts(), "raw", batch_size=250, **loader_args)
    it = iter(loader)
    assert iter(it) is it and len(it) == len(loader) == N // 250
    assert [s.step for s in it] == list(range(N // 250))
    assert not loader._running
    with pytest.raises(StopIteration):
        next(it)
    assert [s.epoch for s in loader] == [1] * (N // 250)
    with pytest.raises(TypeError):
        type(it)()


@needs_torch
def test_a_forked_child_takes_and_releases_nothing(loader_args):
    # The pid that guards the connection is the fork handler's: the child
    # may neither take steps nor give back the parent's.
    loader = infeed.DataLoader(opts(), "raw", batch_size=100,
                               buffer_size=2, **loader_args)
    it = iter(loader)
    s = next(it)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            next(it)
        except infeed.Error as e:
            code = 0 if "forked process must make its own" in str(e) else 2
        del s                               # must not release the slot
        gc.collect()
        os._exit(code)
    assert os.waitpid(pid, 0)[1] == 0
    assert loader._client.held == 1
    got = [s.indices.numpy().copy()]
    del s
    got += [t.indices.numpy().copy() for t in it]
    assert np.array_equal(np.concatenate(got), np.arange(N))


@needs_numpy
@pytest.mark.no_group_window
def test_keeping_every_slot_raises_instead_of_hanging(loader_args):
    loader = infeed.DataLoader(opts(), "raw", batch_size=100,
                               buffer_size=2, output="numpy", **loader_args)
    it = iter(loader)
    kept = [next(it), next(it)]
    t = time.monotonic()
    with pytest.raises(infeed.SlotsHeldError, match="buffer_size"):
        next(it)
    assert time.monotonic() - t < 5
    del kept
    assert next(it).step == 2


@needs_numpy
def test_numpy_output_and_read_only_option(loader_args):
    loader = infeed.DataLoader(opts(), "raw", batch_size=10,
                               output="numpy", writable=False, **loader_args)
    s = next(iter(loader))
    assert isinstance(s.data, np.ndarray) and not s.data.flags.writeable
    assert s.labels.dtype == np.int64 and s.indices.dtype == np.uint64


@needs_numpy
def test_transform_to_float32_and_normalise(loader_args):
    loader = infeed.DataLoader(opts(), "images", batch_size=10,
                               output="numpy", to_float32=True,
                               scale=1 / 255, mean=0.5, std=0.25,
                               **loader_args)
    raw = infeed.DataLoader(opts(), "images", batch_size=10,
                            output="numpy", **loader_args)
    a, b = next(iter(loader)), next(iter(raw))
    assert a.data.dtype == np.float32 and b.data.dtype == np.uint8
    np.testing.assert_allclose(a.data, (b.data / 255 - 0.5) / 0.25,
                               rtol=1e-5, atol=1e-5)


@needs_numpy
def test_errors_raise_their_classes(loader_args, tmp_path):
    with pytest.raises(infeed.NotFoundError, match="no-such"):
        len(infeed.DataLoader(opts(), "no-such", **loader_args))
    with pytest.raises(infeed.InvalidArgumentError, match="batch_size"):
        len(infeed.DataLoader(opts(), "raw", batch_size=0, **loader_args))
    with pytest.raises(infeed.InvalidArgumentError, match="drop_last"):
        len(infeed.DataLoader(opts(di=1000), "raw", batch_size=1000,
                              **loader_args))
    with pytest.raises(infeed.ConnectionClosedError):
        infeed.datasets(socket=str(tmp_path / "nothing.sock"))
    assert isinstance(infeed.NotFoundError("x"), LookupError)
    assert isinstance(infeed.InvalidArgumentError("x"), ValueError)


def test_torch_arguments_refused_or_ignored_by_name(loader_args):
    if np is None:
        pytest.skip("needs numpy")
    for arg in ("sampler", "batch_sampler", "collate_fn", "worker_init_fn",
                "generator", "multiprocessing_context"):
        with pytest.raises(ValueError, match=arg):
            infeed.DataLoader(opts(), "raw", output="numpy",
                              **{arg: object()}, **loader_args)
    with pytest.warns(UserWarning, match="pin_memory"):
        infeed.DataLoader(opts(), "raw", output="numpy", pin_memory=True,
                          **loader_args)
    with pytest.raises(TypeError, match="bogus"):
        infeed.DataLoader(opts(), "raw", output="numpy", bogus=1,
                          **loader_args)
    with pytest.raises(TypeError, match="Dataset object"):
        infeed.DataLoader(opts(), [1, 2, 3], **loader_args)


@needs_numpy
def test_permission_denied(loader_args, daemon, request):
    if os.getgid() != 0:
        with pytest.raises(infeed.PermissionDeniedError):
            len(infeed.DataLoader(opts(), "private", **loader_args))
        return
    if os.getuid() != 0:
        pytest.skip("needs a group other than root")
    nobody = request.getfixturevalue("nobody")
    open_to_others(daemon.dir)
    os.chmod(daemon.socket, 0o666)
    code = ("import infeed, sys\n"
            "try:\n"
            f"    len(infeed.DataLoader(None, 'private', output='numpy', "
            f"socket={daemon.socket!r}))\n"
            "except infeed.PermissionDeniedError as e:\n"
            "    print('denied:', e); sys.exit(3)\n")
    out = nobody.run(code)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "private" in out.stdout


@needs_numpy
def test_timeout_ctrl_c_and_gil_while_the_daemon_is_stopped(loader_args,
                                                            daemon):
    loader = infeed.DataLoader(opts(), "raw", batch_size=10, timeout=0.5,
                               output="numpy", **loader_args)
    it = iter(loader)
    got = [next(it).indices.copy()]
    daemon.pause()                  # no reply at all while stopped
    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.01)
    t = threading.Thread(target=count)
    t.start()
    try:
        with pytest.raises(infeed.StepTimeoutError, match="0.5 seconds"):
            got.append(next(it).indices.copy())
    finally:
        stop.set()
        t.join()
        daemon.resume()
    assert len(ticks) > 10, "the GIL was held during the wait"
    # The Next that timed out is collected: no step lost or repeated.
    got += [s.indices.copy() for s in it]
    assert np.array_equal(np.concatenate(got), np.arange(N))

    # Ctrl-C interrupts a wait in a trainer process.
    code = ("import infeed, sys\n"
            f"l = infeed.DataLoader(None, 'raw', batch_size=10, "
            f"buffer_size=1, output='numpy', socket={daemon.socket!r})\n"
            "it = iter(l); next(it)\n"
            "print('ready', flush=True)\n"
            "sys.stdin.readline()\n"
            "print('asking', flush=True)\n"
            "try:\n"
            "    next(it); next(it)\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted', flush=True); sys.exit(7)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    # Stopped before the trainer asks again, however late this runs.
    daemon.pause()
    try:
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "asking"
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=5) == 7
        assert p.stdout.read().strip() == "interrupted"
    finally:
        daemon.resume()
        if p.poll() is None:
            p.kill()


@needs_numpy
def test_daemon_restart_is_ridden_out_in_order(loader_args, daemon):
    def make():
        return infeed.DataLoader(opts(seed=2), "raw", batch_size=25,
                                 shuffle=True, output="numpy", **loader_args)
    want = epoch_indices(make())
    loader = make()
    it = iter(loader)
    got = [next(it).indices.copy() for _ in range(5)]
    kept = next(it)
    got.append(kept.indices.copy())
    assert daemon.stop() == 0
    daemon.start()
    got += [s.indices.copy() for s in it]
    assert np.array_equal(np.concatenate(got), want)
    assert np.array_equal(kept.indices, got[5])   # held across the restart


def test_datasets_lists_the_catalogue(loader_args):
    names = {d["name"]: d for d in infeed.datasets(loader_args["socket"])}
    assert names["raw"]["samples"] == N
    assert names["raw"]["shape"] == SHAPE
    assert names["raw"]["dtype"] == "float32"


def test_step_pickles_and_unpacks():
    import pickle
    s = infeed.Step(([1], [2], [3], 4, 5))
    data, labels = s
    assert (data, labels, s.indices, s.epoch, s.step) == ([1], [2], [3], 4, 5)
    assert pickle.loads(pickle.dumps(s)).step == 5


@needs_numpy
def test_a_file_cut_under_the_session_raises_data_error(loader_args, daemon):
    loader = infeed.DataLoader(opts(), "raw", batch_size=100,
                               output="numpy", **loader_args)
    it = iter(loader)
    next(it)
    os.truncate(daemon.dir / "raw.bin", 16 * 300)   # samples 300.. gone
    with pytest.raises(infeed.DataError, match="raw.bin"):
        for _ in range(20):
            next(it)


def _sessions(daemon):
    out = subprocess.run([os.environ["INFEEDCTL"], "--socket",
                          str(daemon.socket), "status", "--json"],
                         capture_output=True, text=True, check=True)
    import json
    return json.loads(out.stdout)["sessions"]


def _two_slot_loader(loader_args, **kw):
    """A loader of "raw" in steps of 10 over a ring of two slots, which
    another of the same arguments shares (a group, by default)."""
    kw.setdefault("output", "numpy")
    return infeed.DataLoader(opts(seed=3), "raw", batch_size=10,
                             shuffle=True, buffer_size=2, **kw,
                             **loader_args)


def _every_index_once(*gots):
    """Each list of steps' indices holds every index of the epoch once."""
    for got in gots:
        assert sorted(np.concatenate(got).tolist()) == list(range(N))


@needs_numpy
def test_loaders_of_the_same_data_share_one_pipeline(daemon, loader_args):
    """Two loaders of the same options share one group (issue 25; by
    default) and each gets every index of the epoch once, in the same
    order; one with share=False has steps of its own."""
    def loader(**kw):
        return infeed.DataLoader(opts(seed=3), "raw", batch_size=10,
                                 shuffle=True, output="numpy", **kw,
                                 **loader_args)
    its = [iter(loader()), iter(loader()), iter(loader(share=False))]
    got = [[next(it).indices] for it in its]
    groups = sorted(s["group_id"] for s in _sessions(daemon))
    assert groups[0] == 0 and groups[1] == groups[2] != 0
    for i, it in enumerate(its):
        got[i] += [step.indices for step in it]
    for g in got:
        assert sorted(np.concatenate(g).tolist()) == list(range(N))
    for a, b in zip(got[0], got[1]):
        assert (a == b).all()


@needs_numpy
@pytest.mark.no_group_window
def test_a_loader_that_left_its_group_rejoins_when_it_catches_up(
        daemon, loader_args):
    """A loader that stops holding a step leaves its group (the other
    goes on after the slack); taking steps alone, faster, it rejoins the
    group where the other is; each gets every index once (issue 25)."""
    def loader():
        return infeed.DataLoader(opts(seed=3), "raw", batch_size=10,
                                 shuffle=True, output="numpy", timeout=20,
                                 **loader_args)

    def left(dl):
        sid = dl._info["session_id"]
        return [s["group_left"] for s in _sessions(daemon)
                if s["session_id"] == sid][0]

    def own_ring(dl):                   # libinfeed's, no request (issue 34)
        return dl._client.state()["own_ring"]
    la, lb = loader(), loader()
    ita, itb = iter(la), iter(lb)
    got_a, got_b = [], []
    for _ in range(5):
        got_a.append(next(ita).indices)
        got_b.append(next(itb).indices)
    kept = next(ita)                    # a stops, holding this step
    got_a.append(kept.indices)
    for _ in range(10):
        got_b.append(next(itb).indices)
    assert left(la)
    assert la._client.state()["group_id"] != 0
    assert not own_ring(la)             # no Step has told it yet
    del kept
    for _ in range(9):                  # alone, to where b is
        got_a.append(next(ita).indices)
        assert own_ring(la)
    assert left(la)
    got_a.append(next(ita).indices)     # step 15, from the group's ring
    got_b.append(next(itb).indices)
    assert not left(la)
    assert not left(lb)
    assert not own_ring(la) and not own_ring(lb)
    for a, b in zip(ita, itb):
        got_a.append(a.indices)
        got_b.append(b.indices)
    _every_index_once(got_a, got_b)
    for a, b in zip(got_a, got_b):
        assert (a == b).all()


@needs_numpy
@pytest.mark.no_group_window
def test_a_loader_started_after_its_group_catches_up_and_shares(
        daemon, loader_args):
    """A loader of the same data started after the other's first steps
    joins its group all the same: it takes the group's earlier steps from
    a ring of its own until it is where the group is, then the group's;
    each gets every index once, in the same order (issue 35)."""
    def loader():
        return infeed.DataLoader(opts(seed=3), "raw", batch_size=10,
                                 shuffle=True, output="numpy", timeout=20,
                                 **loader_args)

    def own_ring(dl):
        return dl._client.state()["own_ring"]
    la = loader()
    ita = iter(la)
    got_a = [next(ita).indices for _ in range(12)]
    lb = loader()
    itb = iter(lb)
    got_b, own = [], []
    for _ in range(20):                 # a is 12 steps (and its prefetch) on
        got_b.append(next(itb).indices)
        own.append(own_ring(lb))
    assert lb._client.state()["group_id"] == la._client.state()["group_id"]
    assert own[0] and not own[-1]       # its own ring, then the group's
    assert own == sorted(own, reverse=True)
    for b, a in zip(itb, ita):          # b ends first: no step of a lost
        got_a.append(a.indices)
        got_b.append(b.indices)
    got_a += [a.indices for a in ita]   # b is 8 steps ahead of a by now
    _every_index_once(got_a, got_b)
    for a, b in zip(got_a, got_b):
        assert (a == b).all()


@needs_numpy
@pytest.mark.group_window
def test_a_loader_started_after_its_group_reads_the_groups_window(
        daemon, loader_args):
    """With a group's window of past steps (group_window = 1G: the default
    keeps one only for images, test_images.py checks that), a
    loader started 12 steps after the other joins at once and reads those
    steps from the window, in the group's ring: never a ring of its own,
    every index once, in the same order, and the rows read are 2 epochs'
    and the ring's read-ahead, not the catch-up's 12 steps more (issue
    35)."""
    def loader():
        return infeed.DataLoader(opts(seed=3), "raw", batch_size=10,
                                 shuffle=True, output="numpy", timeout=20,
                                 **loader_args)
    la = loader()
    ita = iter(la)
    got_a = [next(ita).indices for _ in range(12)]
    lb = loader()
    itb = iter(lb)
    got_b = []
    for _ in range(20):
        got_b.append(next(itb).indices)
        assert not lb._client.state()["own_ring"]
    assert lb._client.state()["group_id"] == la._client.state()["group_id"]
    for b, a in zip(itb, ita):
        got_a.append(a.indices)
        got_b.append(b.indices)
    got_a += [a.indices for a in ita]
    _every_index_once(got_a, got_b)
    for a, b in zip(got_a, got_b):
        assert (a == b).all()
    rows = sum(w["rows_done"] for w in json.loads(subprocess.run(
        [os.environ["INFEEDCTL"], "--socket", daemon.socket, "status",
         "--json"], check=True, capture_output=True, text=True).stdout)[
        "workers"])
    per_epoch = sum(len(x) for x in got_b)
    assert rows < per_epoch + 12 * 10, rows


@needs_numpy
def test_a_loader_keeping_its_steps_freezes_no_loader_of_the_same_data(
        daemon, loader_args):
    """One of two loaders of the same data (one group, by default) keeps
    every slot's step and stops taking more, as zip() leaves a loader at
    an epoch's end: the other waits the group's slack, not for ever, and
    both get every index of the epoch once (issue 25)."""
    def loader():
        return infeed.DataLoader(opts(seed=3), "raw", batch_size=10,
                                 shuffle=True, buffer_size=2,
                                 output="numpy", timeout=20, **loader_args)
    ita, itb = iter(loader()), iter(loader())
    kept = [next(ita), next(ita)]      # their data holds their slots
    groups = {s["group_id"] for s in _sessions(daemon)}
    assert len(groups) == 1 and 0 not in groups
    started = time.monotonic()
    got_b = [step.indices for step in itb]
    assert time.monotonic() - started < 20
    got_a = [k.indices for k in kept] + [step.indices for step in ita]
    del kept
    _every_index_once(got_a, got_b)


@needs_numpy
def test_a_member_holding_every_slot_asks_for_its_step_with_a_next_alone(
        daemon, loader_args):
    """A loader that keeps every slot of its group's ring, which the
    daemon moved out of the group meanwhile (the other went on after the
    slack), asks for its next step with a Next alone, no Stats (issue 34,
    item 4): with infeedd stopped, next() keeps to its timeout; once
    infeedd goes on, its steps come from a ring of its own."""
    la = _two_slot_loader(loader_args, timeout=0.5)
    lb = _two_slot_loader(loader_args, timeout=20)
    ita, itb = iter(la), iter(lb)
    kept = [next(ita), next(ita)]       # both slots of the group's ring
    got_b = [step.indices for step in itb]
    sid = la._info["session_id"]
    assert [s["group_left"] for s in _sessions(daemon)
            if s["session_id"] == sid] == [1]
    state = la._client.state()
    assert state["group_id"] != 0 and not state["own_ring"]
    daemon.pause()
    # Were a Stats asked, it would wait for this; the Next would not.
    timer = threading.Timer(3.0, daemon.resume)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(infeed.StepTimeoutError):
            next(ita)
        took = time.monotonic() - started
    finally:
        timer.cancel()
        daemon.resume()
    print(f"next() of the member holding every slot, infeedd stopped: "
          f"{took:.3f} s (timeout 0.5 s)")
    assert took < 2.5
    got_a = [k.indices for k in kept] + [step.indices for step in ita]
    assert la._client.state()["own_ring"]
    _every_index_once(got_a, got_b)


@needs_torch
def test_a_member_on_a_ring_of_its_own_gets_steps_made_ahead(
        daemon, loader_args):
    """The steps of the ring a loader left its group for get torch Steps
    made ahead (spares), as the group's did: their slot numbers follow
    the group's ring, so they are counted from the ring's first slot
    (issue 34, item 4)."""
    la, lb = (_two_slot_loader(loader_args, output="torch", timeout=20)
              for _ in range(2))
    ita, itb = iter(la), iter(lb)
    kept = [next(ita), next(ita)]       # both slots of the group's ring
    for _ in itb:                       # b goes on; a leaves the group
        pass
    lb.close()      # b's spares go: none of them is over a's ring
    del kept[1]     # kept[0] keeps the group's ring mapped, apart from its own
    own = set()
    for _ in range(6):
        step = next(ita)
        own.add(step.data.data_ptr())
        del step
    assert la._client.state()["own_ring"]
    gc.collect()
    ahead = [o for o in gc.get_objects() if isinstance(o, torch.Tensor) and
             o.data_ptr() in own]
    print(f"tensors made ahead on the ring of its own: {len(ahead)}")
    assert ahead, "no step of its own ring was made ahead"
    del kept


@needs_numpy
@pytest.mark.no_group_window
def test_a_member_holding_every_slot_of_its_group_is_told_so(
        daemon, loader_args):
    """A loader that keeps every slot of its group's ring while no other
    member waits (so the group never moves it out) gets SlotsHeldError
    from next(), as a lone loader does, not a wait for ever: infeedd
    refuses its Next (issue 34, item 4); after a release it goes on."""
    la, lb = (_two_slot_loader(loader_args, timeout=20) for _ in range(2))
    ita, itb = iter(la), iter(lb)
    first_b = next(itb).indices
    kept = [next(ita), next(ita)]       # both slots of the group's ring
    assert la._client.state()["group_id"] != 0
    with pytest.raises(infeed.SlotsHeldError, match="buffer_size"):
        next(ita)
    got_a = [k.indices for k in kept]
    del kept
    got_a += [step.indices for step in ita]
    got_b = [first_b] + [step.indices for step in itb]
    _every_index_once(got_a, got_b)


@needs_numpy
def test_a_step_kept_after_close_never_changes_while_the_group_goes_on(
        daemon, loader_args):
    """A loader of a shared group (the default) is closed while the
    program keeps its last step: the other loader goes on to the end of
    the next epoch, and the kept step's data still holds the samples it
    came with (issue 39, item 11: the group refilled its slot)."""
    def loader():
        return infeed.DataLoader(opts(seed=3), "raw", batch_size=10,
                                 shuffle=True, output="numpy", timeout=20,
                                 **loader_args)
    la, lb = loader(), loader()
    ita, itb = iter(la), iter(lb)
    for _ in range(3):
        next(ita)
        next(itb)
    kept = next(itb)
    indices = kept.indices.copy()
    before = np.array(kept.data, copy=True)
    assert (before == expected_data(indices)).all()
    lb.close()
    for _ in ita:                       # the rest of the epoch, and one more
        pass
    for _ in la:
        pass
    row0 = int(round(float(np.asarray(kept.data).reshape(
        len(indices), -1)[0, 0])))
    assert (np.asarray(kept.data) == before).all(), (
        f"row 0 holds sample {row0}, not {indices[0]}")
    la.close()


def _children(pid):
    """The live processes whose parent is @pid (zombies left out)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            if int(ppid) == pid and state != "Z":
                out.append(int(d))
    return out


def test_a_worker_crash_fails_the_test(tmp_path):
    """A worker that crashes is replaced and its job run again, so a test
    may pass through it: stopping the daemon finds the crash in its log
    (tests/crash-marks) and fails; a SIGKILL is no crash."""
    d = Daemon(tmp_path)
    forker = _children(d.proc.pid)
    assert len(forker) == 1
    workers = _children(forker[0])
    assert workers
    os.kill(workers[0], signal.SIGKILL)
    assert d.crash_line() is None
    # Its replacement, once up (the killed one may linger as a zombie).
    for _ in range(500):
        fresh = [p for p in _children(forker[0]) if p != workers[0]]
        if fresh:
            break
        time.sleep(0.01)
    assert fresh, "the killed worker was not replaced within 5 s"
    os.kill(fresh[0], signal.SIGSEGV)
    for _ in range(500):
        if d.crash_line() is not None:
            break
        time.sleep(0.01)
    assert "(SEGV)" in d.crash_line()
    with pytest.raises(AssertionError, match="crashed"):
        d.stop()


def _status(daemon):
    out = subprocess.run([os.environ["INFEEDCTL"], "--socket",
                          str(daemon.socket), "status", "--json"],
                         capture_output=True, text=True, check=True)
    import json
    return json.loads(out.stdout)


def _ring_fds():
    """How many descriptors of this process are open on a memfd (a ring's:
    libinfeed closes them once mapped)."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:")
        except OSError:
            pass                # listdir's own
    return n


def _forget_a_step(daemon, loader_args, kept):
    """A loader V of a group of two whose next() times out while the other
    keeps every slot (@kept); after the slack V leaves and its waiting Next
    is answered by a Step with V's own ring, which nobody collects."""
    a, v = (_two_slot_loader(loader_args, timeout=0.1) for _ in range(2))
    ita, itv = iter(a), iter(v)
    kept += [next(ita), next(ita)]          # a holds both group slots
    got = [next(itv).indices, next(itv).indices]
    with pytest.raises(infeed.StepTimeoutError):
        next(itv)                           # waits for step 2: none
    sid = v._info["session_id"]
    for _ in range(2000):                   # the slack, and V's Step sent
        me = [s for s in _status(daemon)["sessions"]
              if s["session_id"] == sid]
        if me and me[0]["group_left"] and me[0]["steps_delivered"] == 3:
            break
        time.sleep(0.01)
    assert me and me[0]["group_left"], "V did not leave its group"
    assert me[0]["steps_delivered"] == 3, "V's Step did not come"
    time.sleep(0.05)                        # on its way to V's socket
    return a, v, got


@needs_numpy
@pytest.mark.no_group_window
def test_a_forgotten_step_maps_no_stale_ring_and_leaks_nothing(
        daemon, loader_args):
    """A loader whose next() timed out, closed after its group left it
    (its Step with a new ring unread), then iterated again: the new
    epoch's steps are that epoch's, not steps of the old ring, and no
    descriptor stays open (issue 39, item 7)."""
    ref = infeed.DataLoader(opts(seed=3), "raw", batch_size=10,
                            shuffle=True, share=False, output="numpy",
                            **loader_args)
    epoch0 = [step.indices for step in ref]
    want = [step.indices for step in ref]
    ref.close()
    kept = []
    a, v, _ = _forget_a_step(daemon, loader_args, kept)
    assert _ring_fds() == 0     # the Step's descriptor not received yet
    v.close()
    got = [(step.epoch, step.step, step.indices, step.data.copy())
           for step in v]
    for n, (e, s, idx, data) in enumerate(got):
        assert (e, s) == (1, n)
        old = [k for k, w in enumerate(epoch0) if (w == idx).all()]
        assert (idx == want[n]).all(), \
            f"epoch 1 step {n} has the indices of epoch 0 step {old}"
        assert (data == expected_data(idx)).all()
    assert _ring_fds() == 0, "a ring's descriptor stays open"
    del kept
    a.close()
    v.close()


@needs_numpy
@pytest.mark.no_group_window
def test_a_forgotten_step_is_given_back_when_its_loader_closes(
        daemon, loader_args):
    """Three loaders closed after a next() that timed out, each with its
    Step unread: the daemon's memory_used returns to what it was while
    this process lives on (issue 39, item 8)."""
    def charged():
        st = _status(daemon)
        return st["memory_used"] + st["memory_held"]
    base = charged()
    for _ in range(3):
        kept = []
        a, v, _ = _forget_a_step(daemon, loader_args, kept)
        v.close()
        del kept
        a.close()
    for _ in range(300):
        used = charged()
        if used == base:
            break
        time.sleep(0.01)
    print(f"memory_used + memory_held {base} B before, {used} B after "
          f"three loaders closed ({(used - base) / 2**20:.3f} MiB held)")
    assert used == base, "a forgotten step stays charged to the budget"
    assert "still holds steps" not in daemon.log_text()
