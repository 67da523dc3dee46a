# SPDX-License-Identifier: MIT
"""infeed.Files: the trainer's own .npy or raw files, opened by the trainer
and passed to infeedd by descriptor."""

import os
import subprocess
import sys

import pytest

import infeed
from conftest import open_to_others

np = pytest.importorskip("numpy")


def npy_pair(tmp_path, n=500):
    data = (np.arange(n * 6, dtype=np.float32).reshape(n, 2, 3))
    labels = (np.arange(n) % 7).astype(np.int64)
    np.save(tmp_path / "x.npy", data)
    np.save(tmp_path / "y.npy", labels)
    return data, labels


def test_npy_files_every_index_once_with_their_bytes(loader_args, tmp_path,
                                                       daemon):
    data, labels = npy_pair(tmp_path)
    loader = infeed.DataLoader(
        None, infeed.Files(tmp_path / "x.npy", tmp_path / "y.npy"),
        batch_size=20, shuffle=True, output="numpy", **loader_args)
    assert loader.info["sample_shape"] == (2, 3)
    seen = []
    for step in loader:
        idx = step.indices.astype(np.int64)
        assert np.array_equal(step.data, data[idx])
        assert np.array_equal(step.labels, labels[idx])
        seen.append(idx)
    seen = np.concatenate(seen)
    assert sorted(seen) == list(range(500))
    # infeedd got descriptors, never the path.
    assert str(tmp_path / "x.npy") not in daemon.log_text()


def test_raw_files_need_shape_and_dtype(loader_args, tmp_path):
    data = np.arange(300 * 4, dtype=np.uint8).reshape(300, 4)
    data.tofile(tmp_path / "x.bin")
    (np.arange(300) % 3).astype(np.int32).tofile(tmp_path / "y.bin")
    with pytest.raises(ValueError, match="shape="):
        infeed.Files(tmp_path / "x.bin")
    loader = infeed.DataLoader(
        None, infeed.Files(tmp_path / "x.bin", tmp_path / "y.bin",
                           shape=(4,), dtype=np.uint8, label_dtype="int32"),
        batch_size=30, output="numpy", **loader_args)
    step = next(iter(loader))
    assert np.array_equal(step.data, data[:30])
    assert list(step.labels) == [i % 3 for i in range(30)]


def test_bad_file_is_refused_with_the_reason(loader_args, tmp_path):
    (tmp_path / "x.npy").write_bytes(b"not an npy file at all")
    with pytest.raises(infeed.Error, match="npy"):
        len(infeed.DataLoader(None, infeed.Files(tmp_path / "x.npy"),
                              output="numpy", **loader_args))


def test_a_file_the_trainer_cannot_read_fails_in_the_trainer(tmp_path,
                                                             request):
    npy_pair(tmp_path)
    os.chmod(tmp_path / "x.npy", 0o600)
    code = ("import infeed, sys\n"
            "try:\n"
            f"    infeed.DataLoader(None, infeed.Files({str(tmp_path)!r} + "
            f"'/x.npy'), output='numpy', socket='/nonexistent').info\n"
            "except PermissionError as e:\n"
            "    print('refused:', e); sys.exit(3)\n")
    if os.getuid() == 0:
        nobody = request.getfixturevalue("nobody")
        open_to_others(tmp_path)
        out = nobody.run(code)
    else:
        os.chmod(tmp_path / "x.npy", 0)
        out = subprocess.run([sys.executable, "-c", code],
                             capture_output=True, text=True, cwd="/")
    # The OS refused the open before any connection to infeedd.
    assert out.returncode == 3, out.stdout + out.stderr
    assert "x.npy" in out.stdout
