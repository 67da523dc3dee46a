# SPDX-License-Identifier: MIT
"""The image readers' index against the Python it must match: torchvision's
ImageFolder on a generated tree (classes, class_to_idx, samples, errors),
and tar shards written by Python's tarfile (as webdataset writes them)
against webdataset's grouping rules, reimplemented here from the
reference (webdataset itself is not a Debian package).  The C index comes
from tests/daemon/image-index-tool (meson sets $INFEED_IMAGE_INDEX_TOOL)."""

import io
import os
import random
import re
import subprocess
import tarfile
import zlib

import pytest

TOOL = os.environ.get("INFEED_IMAGE_INDEX_TOOL")
pytestmark = pytest.mark.skipif(TOOL is None,
                                reason="meson sets INFEED_IMAGE_INDEX_TOOL")

EXTS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff",
        ".webp")


def run_tool(*args):
    """The C index: (class names, [(label, where, len, crc)]), or the
    message of a refused dataset as a str."""
    out = subprocess.run([TOOL, "--bytes", *args], capture_output=True)
    if out.returncode == 1:
        return out.stderr.decode().strip()
    assert out.returncode == 0, out.stderr
    classes, samples = [], []
    for line in out.stdout.decode().splitlines():
        f = line.split("\t")
        if f[0] == "classes":
            continue
        if f[0] == "class":
            assert int(f[1]) == len(classes)
            classes.append(f[2])
            continue
        assert int(f[0]) == len(samples)
        samples.append((int(f[1]), f[2], int(f[3]), int(f[4])))
    return classes, samples


def imagefolder(root):
    tv = pytest.importorskip("torchvision.datasets")
    return tv.ImageFolder(str(root), loader=lambda p: p)


def make_tree(root, rng):
    """A tree with every trap: hidden and odd class names, nested
    directories whose names sort around '/', mixed-case extensions,
    non-images, symlinks to directories, a dangling symlink, empty
    subdirectories."""
    names = ["a", "a b", "a-1", "a.1", "a_1", "sub", "sub-2", "sub.1",
             "sub_z", "Sub", "é", "ünï", "x y", ".hid", "0", "Z", "~"]
    files = ["img", "IMG", "a b", "é", ".x", "x.y", "_", "Z", "0"]
    exts = [".jpg", ".JPG", ".Jpeg", ".png", ".PNG", ".ppm", ".bmp",
            ".pgm", ".tif", ".TIFF", ".webp", ".WebP", ".gif", ".txt",
            ".jpg.txt", "", ".jpeg~"]
    classes = [".hidden", "B", "_x", "a", "a b", "é", "Z9", "n01440764",
               "zz"]
    root.mkdir()
    for c in classes:
        dirs = [root / c]
        dirs[0].mkdir()
        for _ in range(rng.randint(1, 4)):
            d = rng.choice(dirs) / rng.choice(names)
            d.mkdir(exist_ok=True)
            dirs.append(d)
        for _ in range(rng.randint(1, 12)):
            p = rng.choice(dirs) / (rng.choice(files) + rng.choice(exts))
            p.write_bytes(str(p.relative_to(root)).encode())
        (root / c / ("keep" + rng.choice(EXTS))).write_bytes(b"k")
    (root / "outside").mkdir()
    (root / "outside" / "in.JPG").write_bytes(b"o")
    (root / "linkclass").symlink_to("outside")
    (root / "a" / "linked").symlink_to("../outside")
    (root / "a" / "dangling.jpg").symlink_to("nowhere")
    (root / "root-file.jpg").write_bytes(b"r")
    (root / ".jpg").write_bytes(b"r")


@pytest.mark.parametrize("seed", range(6))
def test_imagefolder_index_matches_torchvision(tmp_path, seed):
    root = tmp_path / "train"
    make_tree(root, random.Random(seed))
    ds = imagefolder(root)
    classes, samples = run_tool("type=imagefolder", f"root={root}")
    assert classes == ds.classes
    assert {c: i for i, c in enumerate(classes)} == ds.class_to_idx
    got = [(where.strip("'"), label) for label, where, _, _ in samples]
    want = [(p, t) for p, t in ds.samples]
    # The label comes with the bytes: a dangling link has neither.
    for i, (p, t) in enumerate(want):
        if not os.path.exists(p):
            assert samples[i][2] == -1
            want[i] = (p, -1)
    assert got == want


def test_imagefolder_errors_are_torchvisions(tmp_path):
    tv = pytest.importorskip("torchvision.datasets")
    root = tmp_path / "r"
    (root / "empty").mkdir(parents=True)
    (root / "a").mkdir()
    (root / "a" / "x.png").write_bytes(b"x")
    (root / "b" / "deep").mkdir(parents=True)
    (root / "b" / "deep" / "notes.txt").write_bytes(b"x")
    with pytest.raises(FileNotFoundError) as e:
        tv.ImageFolder(str(root))
    msg = run_tool("type=imagefolder", f"root={root}")
    assert msg.startswith("dataset 'tool': " + str(e.value) + " (set "
                          "'allow_empty = true'")

    none = tmp_path / "none"
    none.mkdir()
    (none / "file.jpg").write_bytes(b"x")
    with pytest.raises(FileNotFoundError) as e:
        tv.ImageFolder(str(none))
    assert run_tool("type=imagefolder", f"root={none}") == \
        "dataset 'tool': " + str(e.value)


# webdataset 1.0.2's rules, from the reference (section 6).
KEY_RE = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")
META_RE = re.compile(r"__[^/]*__($|/)")
IMAGE = {"jpg", "jpeg", "png", "ppm", "pgm", "bmp", "tif", "tiff", "webp"}


def wds_samples(shard):
    """webdataset's tar_file_iterator + group_by_keys over one shard."""
    out, cur = [], None
    with tarfile.open(shard, "r|") as tf:
        for ti in tf:
            if not ti.isreg():
                continue
            name = ti.name
            if ("/" not in name and name.startswith("__") and
                    name.endswith("__")) or META_RE.match(name):
                continue
            data = tf.extractfile(ti).read()
            m = KEY_RE.match(name)
            if m is None:
                continue
            key, suffix = m.group(1), m.group(2).lower()
            if cur is None or key != cur["__key__"]:
                if cur is not None:
                    out.append(cur)
                cur = {"__key__": key}
            assert suffix not in cur
            cur[suffix] = (name, data)
    if cur is not None:
        out.append(cur)
    return out


def write_shard(path, members, fmt, rng):
    with tarfile.open(path, "w", format=fmt) as tf:
        for name, data in members:
            if data is None:
                ti = tarfile.TarInfo(name)
                ti.type = tarfile.DIRTYPE
                tf.addfile(ti)
                continue
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            # webdataset's writer: a float mtime, so a pax header each.
            ti.mtime = 1.7e9 + rng.random() if fmt == tarfile.PAX_FORMAT \
                else 1700000000
            tf.addfile(ti, io.BytesIO(data))


def shard_members(rng, shard):
    members = []
    if rng.random() < 0.5:
        members.append(("__meta__", b"skipped"))
    for i in range(rng.randint(5, 40)):
        d = rng.choice(["", "train/", "train/n01/", "a.b/", "d" * 120 +
                        "/", "é/"])
        base = rng.choice(["s", "img_", "x" * 90, "ü"]) + f"{shard}_{i}"
        img = rng.choice(["jpg", "JPG", "jpeg", "png", "Png", "webp"])
        label = rng.randint(0, 30)
        cls = rng.choice([f"{label}", f"{label}\n", f" {label} ",
                          f"+{label}", f"{label:_}"])
        field = [(f"{d}{base}.{img}", rng.randbytes(rng.randint(0, 3000))),
                 (f"{d}{base}.cls", cls.encode())]
        if rng.random() < 0.3:
            field.append((f"{d}{base}.json", b"{}"))
        if rng.random() < 0.3:
            field.append((f"{d}{base}.seg.png", b"mask"))
        rng.shuffle(field)
        if rng.random() < 0.2:
            members.append((d + "noext", b"skipped"))
        if rng.random() < 0.1 and d:
            members.append((d.rstrip("/"), None))
        members += field
    return members


@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT,
                                 tarfile.USTAR_FORMAT])
def test_tar_index_matches_webdataset_grouping(tmp_path, fmt):
    rng = random.Random(fmt)
    shards = []
    for s in range(3):
        path = tmp_path / f"shard-{s:06d}.tar"
        members = shard_members(rng, s)
        if fmt == tarfile.USTAR_FORMAT:     # no long basenames in ustar
            members = [(n.replace("x" * 90, "x"), d) for n, d in members]
        write_shard(path, members, fmt, rng)
        shards.append(path)
    want = []
    for path in shards:
        for smp in wds_samples(path):
            images = [k for k in smp if k in IMAGE]
            assert len(images) == 1 and "cls" in smp
            name, data = smp[images[0]]
            want.append((int(smp["cls"][1]), f"member '{name}' of shard "
                         f"'{path}'", len(data), zlib.crc32(data)))
    classes, got = run_tool("type=tar",
                            f"shards={tmp_path}/shard-{{000000..000002}}.tar")
    assert classes == []
    assert got == want


def test_tar_refuses_what_webdataset_would_trip_on(tmp_path):
    rng = random.Random(1)
    path = tmp_path / "s.tar"
    write_shard(path, [("a.jpg", b"i"), ("a.cls", b"1"), ("b.cls", b"2")],
                tarfile.PAX_FORMAT, rng)
    assert run_tool("type=tar", f"shards={path}") == (
        f"dataset 'tool': member 'b.cls' of shard '{path}': sample 'b' "
        "has no image (.jpg, .jpeg or .png)")
    write_shard(path, [("a.jpg", b"i"), ("a.cls", b"1"), ("a.JPG", b"2")],
                tarfile.PAX_FORMAT, rng)
    assert "duplicate file name in tar file" in run_tool(
        "type=tar", f"shards={path}")
    gz = tmp_path / "s.tar.gz"
    with tarfile.open(gz, "w:gz") as tf:
        ti = tarfile.TarInfo("a.jpg")
        tf.addfile(ti, io.BytesIO(b""))
    assert "is gzip-compressed" in run_tool("type=tar", f"shards={gz}")
