# SPDX-License-Identifier: MIT
"""Image datasets end to end: an ImageFolder tree and the same samples in
WebDataset tar shards, served by a real infeedd, against torchvision's
ImageFolder and transforms on the same files."""

import gc
import io
import json
import os
import re
import subprocess
import tarfile
import time
import urllib.request

import pytest

import infeed
from conftest import Daemon

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
tv = pytest.importorskip("torchvision")
Image = pytest.importorskip("PIL.Image")
from torchvision import transforms as T  # noqa: E402

PHOTOS = "/usr/lib/python3/dist-packages/skimage/data"
# Class names in an order torchvision's code-point sort decides: hidden
# first, capitals before lower case, a space, a nested directory.
CLASSES = [".hidden", "Zebra", "a b", "cat", "dog"]
PER_CLASS = 7
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def _photos():
    names = ["astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg",
             "motorcycle_left.png", "camera.png"]
    out = []
    for n in names:
        p = os.path.join(PHOTOS, n)
        if os.path.exists(p):
            out.append(Image.open(p).convert("RGB"))
    if len(out) < 2:
        pytest.skip("needs python3-skimage's photographs")
    return out


def _image(rng, photos, k):
    """A JPEG or PNG of some size and mode, cut from a photograph."""
    src = photos[k % len(photos)]
    w = int(rng.integers(40, 160))
    h = int(rng.integers(40, 160))
    x = int(rng.integers(0, src.width - w))
    y = int(rng.integers(0, src.height - h))
    img = src.crop((x, y, x + w, y + h))
    kind = k % 6
    buf = io.BytesIO()
    if kind == 0:
        img.save(buf, "PNG")
        ext = ".png"
    elif kind == 1:
        img.convert("L").save(buf, "JPEG", quality=90)
        ext = ".JPG"
    elif kind == 2:
        img.convert("RGBA").save(buf, "PNG")
        ext = ".png"
    elif kind == 3:
        img.save(buf, "JPEG", quality=85, subsampling=2)
        ext = ".jpeg"
    elif kind == 4:
        img.convert("P", palette=Image.ADAPTIVE).save(buf, "PNG")
        ext = ".PNG"
    else:
        img.save(buf, "JPEG", quality=95, subsampling=0)
        ext = ".jpg"
    return buf.getvalue(), ext


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """root/<class>/[sub/]<file>, plus tar shards of the same samples."""
    base = tmp_path_factory.mktemp("images")
    root = base / "train"
    rng = np.random.default_rng(18)
    photos = _photos()
    k = 0
    for c in CLASSES:
        for j in range(PER_CLASS):
            sub = root / c / ("sub" if j % 3 == 2 else "")
            sub.mkdir(parents=True, exist_ok=True)
            data, ext = _image(rng, photos, k)
            (sub / f"img{j:02d}{ext}").write_bytes(data)
            k += 1
        (root / c / "notes.txt").write_text("not an image")
    folder = tv.datasets.ImageFolder(str(root))
    # The same samples, in the same order, as WebDataset shards.
    shards = []
    per_shard = 12
    for s in range(0, len(folder.samples), per_shard):
        path = base / f"train-{s // per_shard:06d}.tar"
        with tarfile.open(path, "w") as t:
            for i, (p, label) in enumerate(folder.samples[s:s + per_shard]):
                key = f"{s + i:06d}"
                for suffix, data in (
                        (os.path.splitext(p)[1].lower().lstrip("."),
                         open(p, "rb").read()),
                        ("cls", str(label).encode())):
                    info = tarfile.TarInfo(f"{key}.{suffix}")
                    info.size = len(data)
                    info.mtime = 1700000000.5   # a pax header, as wds
                    t.addfile(info, io.BytesIO(data))
        shards.append(path)
    pattern = str(base / f"train-{{000000..{len(shards) - 1:06d}}}.tar")
    # A tree with one truncated JPEG.
    bad = base / "bad"
    for c in ("a", "b"):
        (bad / c).mkdir(parents=True)
        for j in range(4):
            data, _ = _image(rng, photos, 3)
            (bad / c / f"{j}.jpg").write_bytes(data)
    whole = (bad / "b" / "1.jpg").read_bytes()
    (bad / "b" / "1.jpg").write_bytes(whole[:len(whole) // 2])
    return {"root": root, "folder": folder, "pattern": pattern,
            "bad": bad, "base": base}


def _config(tree):
    return ("metrics_listen = 127.0.0.1:0\n"
            f"\n[dataset imgs]\ntype = imagefolder\nroot = {tree['root']}\n"
            f"\n[dataset imgs-tar]\ntype = tar\nshards = {tree['pattern']}\n"
            f"\n[dataset imgs-bad]\ntype = imagefolder\nroot = {tree['bad']}\n"
            f"\n[dataset imgs-replace]\ntype = imagefolder\n"
            f"root = {tree['bad']}\nbad_samples = replace\n")


@pytest.fixture
def images(tmp_path, tree, request):
    linger = request.node.get_closest_marker("group_linger")
    d = Daemon(tmp_path, ("group_linger = auto\n" if linger else "") +
               _config(tree))
    yield d
    rc = d.stop()
    assert rc == 0, f"infeedd did not exit cleanly ({rc}):\n{d.log_text()}"


def _opts(seed=5):
    return infeed.Options().randomSeed(seed)


def _epoch(daemon, name, transform, seed=5, shuffle=False, batch_size=5):
    """Every row of one epoch: (indices, labels, data) in delivery order."""
    loader = infeed.DataLoader(_opts(seed), name, batch_size=batch_size,
                               shuffle=shuffle, drop_last=False,
                               transform=transform, output="numpy",
                               socket=daemon.socket, client_name="pytest")
    idx, labels, data = [], [], []
    for step in loader:
        idx.append(np.array(step.indices, dtype=np.int64))
        labels.append(np.array(step.labels))
        data.append(np.array(step.data))
    return np.concatenate(idx), np.concatenate(labels), np.concatenate(data)


EVAL = T.Compose([T.Resize(48), T.CenterCrop(40), T.ToTensor(),
                  T.Normalize(MEAN, STD)])


def test_labels_and_order_are_torchvisions(images, tree):
    folder = tree["folder"]
    idx, labels, _ = _epoch(images, "imgs", "Resize(32), CenterCrop(32), "
                            "PILToTensor()")
    assert list(idx) == list(range(len(folder.samples)))
    assert list(labels) == folder.targets
    names = {d["name"]: d for d in infeed.datasets(images.socket)}
    assert names["imgs"]["samples"] == len(folder.samples)
    assert names["imgs"]["classes"] == len(folder.classes)


def test_evaluation_pipeline_matches_torchvision(images, tree):
    folder = tree["folder"]
    idx, labels, data = _epoch(images, "imgs", EVAL)
    assert data.shape == (len(folder.samples), 3, 40, 40)
    assert data.dtype == np.float32
    for i in idx:
        want = EVAL(folder[i][0]).numpy()
        got = data[i]
        assert np.abs(got - want).mean() < 1e-6, (i, folder.samples[i][0])


def test_flip_and_uint8_outputs_match_torchvision(images, tree):
    folder = tree["folder"]
    flip = T.Compose([T.Resize((36, 44)), T.RandomHorizontalFlip(p=1.0),
                      T.PILToTensor()])
    _, _, chw = _epoch(images, "imgs", flip)
    assert chw.dtype == np.uint8 and chw.shape[1:] == (3, 36, 44)
    _, _, hwc = _epoch(images, "imgs", "Resize((36, 44)), "
                       "RandomHorizontalFlip(p=1.0)")
    assert hwc.shape[1:] == (36, 44, 3)
    assert np.array_equal(hwc.transpose(0, 3, 1, 2), chw)
    for i in range(0, len(folder.samples), 4):
        want = flip(folder[i][0]).numpy()
        assert np.abs(chw[i].astype(int) - want).mean() < 1.0 / 255, i


TRAIN = ("RandomResizedCrop(32), RandomHorizontalFlip(), ToTensor(), "
         "Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])")


def test_a_late_loader_of_images_reads_the_groups_window(images):
    """group_window = auto keeps a window of past steps for a group that
    decodes images: a loader started 4 steps after another of the same
    options joins its group at once and reads those steps from the
    group's ring, never a ring of its own (without the window it would
    decode them again on one), and gets the same rows (issue 35)."""
    def loader():
        return infeed.DataLoader(_opts(), "imgs", batch_size=2,
                                 shuffle=True, transform=TRAIN,
                                 output="numpy", timeout=20,
                                 socket=images.socket, client_name="pytest")
    la, lb = loader(), None
    ita = iter(la)
    got_a = [np.array(next(ita).indices) for _ in range(4)]
    lb = loader()
    itb = iter(lb)
    got_b = []
    for _ in range(4):
        got_b.append(np.array(next(itb).indices))
        assert not lb._client.state()["own_ring"]
    assert lb._client.state()["group_id"] == la._client.state()["group_id"]
    for a, b in zip(got_a, got_b):
        assert (a == b).all()
    la.close()
    lb.close()
    # A store by default (group_linger = auto), its images as uint8: it
    # costs a trainer alone little (docs/performance.md, round six).
    assert "keeps a store" in images.log_text()
    assert "images as uint8" in images.log_text()


def _rows_decoded(daemon):
    """Rows infeedd's workers read (decoded, for images) since it started."""
    return sum(w["rows_done"] for w in json.loads(subprocess.run(
        [os.environ["INFEEDCTL"], "--socket", daemon.socket, "status",
         "--json"], check=True, capture_output=True, text=True).stdout)[
        "workers"])


@pytest.mark.group_linger
def test_a_loader_started_after_its_group_ended_reads_the_lingering_store(
        images):
    """A group that decodes images keeps a store of its past steps, which
    lingers group_linger (auto, the default: 30 s) after its last
    loader closed: a
    loader of the same options started after that reads its two epochs as
    copies from the store, next to no image decoded again (without the
    store, every one), and gets the same rows, bytes and order (issue
    35).  The store keeps the images as uint8 (the pipeline ends in
    ToTensor and Normalize) and serves them through the same tail: the
    floats are the decoded ones bit for bit."""
    def run():
        ld = infeed.DataLoader(_opts(), "imgs", batch_size=2, shuffle=True,
                               transform=TRAIN, output="numpy", timeout=20,
                               socket=images.socket, client_name="pytest")
        got = []
        for _ in range(2):
            got += [(np.array(s.indices), np.array(s.data)) for s in ld]
        ld.close()
        return got
    first = run()
    decoded = _rows_decoded(images)
    time.sleep(0.5)     # the daemon ends the group as the loader goes
    second = run()
    again = _rows_decoded(images) - decoded
    rows = sum(len(i) for i, _ in first)
    assert again <= rows // 4, (again, rows)
    assert "images as uint8" in images.log_text()
    assert len(first) == len(second)
    for (ia, da), (ib, db) in zip(first, second):
        assert (ia == ib).all() and np.array_equal(da, db)


def test_random_crops_depend_on_seed_epoch_and_index_only(tmp_path, tree):
    d = Daemon(tmp_path, _config(tree))
    try:
        a = _epoch(d, "imgs", TRAIN, shuffle=True)
        b = _epoch(d, "imgs", TRAIN, shuffle=True, batch_size=3)
        c = _epoch(d, "imgs", TRAIN, seed=6, shuffle=True)
        d.stop()
        d.start(workers=1)     # another worker count, another process
        e = _epoch(d, "imgs", TRAIN, shuffle=True)
    finally:
        d.stop()
    by_index = [x[2][np.argsort(x[0])] for x in (a, b, c, e)]
    assert np.array_equal(by_index[0], by_index[1])
    assert np.array_equal(by_index[0], by_index[3])
    assert not np.array_equal(by_index[0], by_index[2])


def test_random_crops_survive_an_elastic_resume(images, tree):
    """4 processes take 2 steps of an epoch, 2 processes of another batch
    resume it (load_state_dict): every sample gets the crop it gets in an
    uninterrupted epoch of one process, and none comes twice."""
    idx, _, data = _epoch(images, "imgs", TRAIN, shuffle=True)
    want = dict(zip(idx.tolist(), data))

    def loader(p, count, batch):
        o = _opts()
        o.Distributed.configureProcessId(p, count)
        return infeed.DataLoader(o, "imgs", batch_size=batch, shuffle=True,
                                 drop_last=False, transform=TRAIN,
                                 output="numpy", socket=images.socket)
    got = []
    for p in range(4):
        ld = loader(p, 4, 2)
        it = iter(ld)
        for _ in range(2):
            step = next(it)
            got += zip(step.indices.tolist(), np.array(step.data))
        state = ld.state_dict()
        ld.close()
    for p in range(2):
        ld = loader(p, 2, 3)
        ld.load_state_dict(state)
        for step in ld:
            got += zip(step.indices.tolist(), np.array(step.data))
    assert sorted(i for i, _ in got) == sorted(want)
    for i, crop in got:
        assert np.array_equal(crop, want[i]), i


def test_tar_shards_give_the_folders_samples(images, tree):
    n = len(tree["folder"].samples)
    for name in ("imgs", "imgs-tar"):
        idx, _, _ = _epoch(images, name, TRAIN, shuffle=True)
        assert sorted(idx) == list(range(n)), name   # exactly once
    f = _epoch(images, "imgs", TRAIN, shuffle=True)
    t = _epoch(images, "imgs-tar", TRAIN, shuffle=True)
    assert np.array_equal(f[0], t[0]) and np.array_equal(f[1], t[1])
    assert np.array_equal(f[2], t[2])


def test_a_truncated_image_names_its_file(images, tree):
    with pytest.raises(infeed.DataError, match=r"b/1\.jpg") as e:
        _epoch(images, "imgs-bad", "Resize(16), CenterCrop(16), ToTensor()")
    assert "sample 5" in str(e.value)       # a/0-3, then b/0, b/1
    assert "bad_samples = replace" in str(e.value)


def _status(daemon):
    out = subprocess.run([os.environ["INFEEDCTL"], "--socket",
                          str(daemon.socket), "status", "--json"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_bad_samples_replace_goes_on_and_counts(images):
    pipeline = "Resize(16), CenterCrop(16), ToTensor()"
    idx, _, data = _epoch(images, "imgs-replace", pipeline)
    assert sorted(idx) == list(range(8))
    assert "replaced by sample" in images.log_text()
    assert data[5].std() > 0      # another image's pixels, not zeros
    # Counted in status while the session lives: both steps of the epoch
    # taken (sample 5 is in the second), the loader not yet finished.
    loader = infeed.DataLoader(_opts(), "imgs-replace", batch_size=5,
                               drop_last=False, transform=pipeline,
                               output="numpy", socket=images.socket)
    it = iter(loader)
    next(it), next(it)
    (ss,) = [s for s in _status(images)["sessions"]
             if s["dataset"] == "imgs-replace"]
    assert ss["samples_replaced"] == 1
    assert ss["transform"] == pipeline
    # And as a Prometheus series, while the session lives and once ended.
    assert _replaced_series(images, "imgs-replace", live=True) == [1.0]
    assert list(it) == []
    del it, loader
    gc.collect()
    for _ in range(100):
        if not _replaced_series(images, "imgs-replace", live=True):
            break
        time.sleep(0.05)
    assert _replaced_series(images, "imgs-replace", live=True) == []
    (ended,) = _replaced_series(images, "imgs-replace", live=False)
    assert ended >= 1.0


def _metrics(daemon):
    port = re.search(r"metrics on http://127.0.0.1:(\d+)/metrics",
                     daemon.log_text()).group(1)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                timeout=10) as r:
        return r.read().decode()


def _replaced_series(daemon, dataset, live):
    """infeed_samples_replaced_total of @dataset's live sessions' series,
    or of its ended sessions' one series."""
    return [float(line.rsplit(" ", 1)[1])
            for line in _metrics(daemon).splitlines()
            if line.startswith("infeed_samples_replaced_total{") and
            f'dataset="{dataset}"' in line and
            ('session="ended"' in line) != live]


def test_transforms_are_refused_by_name(images):
    with pytest.raises(ValueError, match="ColorJitter"):
        infeed.DataLoader(_opts(), "imgs", batch_size=2,
                          transform=T.Compose([T.ColorJitter(0.1),
                                               T.ToTensor()]),
                          socket=images.socket)
    loader = infeed.DataLoader(_opts(), "imgs", batch_size=2,
                               socket=images.socket)
    with pytest.raises(infeed.InvalidArgumentError, match="RandomResized"):
        iter(loader).__next__()
    loader = infeed.DataLoader(_opts(), "raw", batch_size=2,
                               transform=TRAIN, socket=images.socket)
    with pytest.raises(infeed.InvalidArgumentError, match="image datasets"):
        iter(loader).__next__()
    loader = infeed.DataLoader(_opts(), "imgs", batch_size=2,
                               transform="Resize(32), ToTensor()",
                               socket=images.socket)
    with pytest.raises(infeed.InvalidArgumentError, match="CenterCrop"):
        iter(loader).__next__()


def test_infeed_transforms_need_no_torchvision():
    from infeed import transforms as IT
    t = IT.Compose([IT.RandomResizedCrop(224), IT.RandomHorizontalFlip(),
                    IT.ToTensor(), IT.Normalize(MEAN, STD)])
    tv_t = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
                      T.ToTensor(), T.Normalize(MEAN, STD)])
    assert IT.pipeline(t) == IT.pipeline(tv_t)
    assert IT.pipeline(t).startswith("RandomResizedCrop(224, scale=(0.08")
    with pytest.raises(ValueError, match="bilinear"):
        IT.Resize(256, interpolation="nearest")
