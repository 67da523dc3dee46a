# SPDX-License-Identifier: MIT
"""infeed's image transforms (daemon/dataset/image-*.c, through
tests/daemon/image-transform-tool) against torchvision 0.14 on PIL images,
bit for bit: for the crop box and flip the tool reports, torchvision's
resized_crop -> hflip -> to_tensor -> normalize must give the same bytes;
Resize + CenterCrop, CenterCrop with padding and Resize((h, w)) are
compared with torchvision's own transforms.  Then the crop boxes' spread
against torchvision's get_params."""

import math
import os
import random
import subprocess

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
Image = pytest.importorskip("PIL.Image")
import torchvision.transforms as T                       # noqa: E402
import torchvision.transforms.functional as F            # noqa: E402

TOOL = os.environ.get("INFEED_IMAGE_TRANSFORM_TOOL")
SKIMAGE = "/usr/lib/python3/dist-packages/skimage/data"
PHOTOS = ["astronaut.png", "chelsea.png", "coffee.png", "rocket.png",
          "motorcycle_left.png", "camera.png", "horse.png", "coins.png"]
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
BIL = T.InterpolationMode.BILINEAR

pytestmark = pytest.mark.skipif(
    TOOL is None, reason="meson sets INFEED_IMAGE_TRANSFORM_TOOL")


def synthetic(w, h, seed):
    rng = np.random.default_rng(seed)
    # Smooth gradients plus noise: edges and flat areas both.
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // max(w, 1)), (y * 255 // max(h, 1)),
                     ((x + y) * 7) % 256], axis=-1)
    noise = rng.integers(0, 256, size=(h, w, 3))
    img = np.where(rng.random((h, w, 1)) < 0.3, noise, base)
    return Image.fromarray(img.astype(np.uint8), "RGB")


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    d = tmp_path_factory.mktemp("images")
    out = []
    for name in PHOTOS:
        path = os.path.join(SKIMAGE, name)
        if os.path.exists(path):
            out.append((name, Image.open(path).convert("RGB")))
    for i, (w, h) in enumerate([(1, 1), (2, 3), (5, 4), (7, 1), (1, 9),
                                (13, 11), (1000, 10), (10, 1000),
                                (3, 400), (640, 2), (300, 299)]):
        out.append((f"synthetic-{w}x{h}", synthetic(w, h, i)))
    assert len(out) >= 15, "skimage's photographs are missing"
    files = []
    for name, img in out:
        raw = d / (name + ".rgb")
        raw.write_bytes(np.asarray(img, dtype=np.uint8).tobytes())
        files.append((name, img, str(raw)))
    return files


def run_tool(img, raw, pipeline, seed, index, outdir, simd=None):
    out = os.path.join(outdir, "out.bin")
    cmd = [TOOL]
    if simd:
        cmd += ["-s", simd]
    cmd += [str(img.width), str(img.height), raw, pipeline, str(seed), "0",
            str(index), out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, (pipeline, r.stderr)
    f = r.stdout.split()
    plan = {"crop": tuple(int(v) for v in f[3:7]), "flip": int(f[8]),
            "out": (int(f[15]), int(f[16]))}
    with open(out, "rb") as fp:
        return plan, fp.read()


def tensor_bytes(img, output, normalize):
    """A PIL image as the pipeline's output would hold it."""
    if output == "hwc":
        return np.asarray(img, dtype=np.uint8).tobytes()
    if output == "u8":
        return F.pil_to_tensor(img).contiguous().numpy().tobytes()
    t = F.to_tensor(img)
    if normalize:
        t = F.normalize(t, MEAN, STD)
    return t.contiguous().numpy().tobytes()


def tail_text(output, normalize):
    if output == "hwc":
        return ""
    if output == "u8":
        return ", PILToTensor()"
    s = ", ToTensor()"
    if normalize:
        s += f", Normalize(mean={MEAN}, std={STD})"
    return s


def first_diff(a, b, output):
    dt = np.float32 if output == "f32" else np.uint8
    x, y = np.frombuffer(a, dt), np.frombuffer(b, dt)
    if x.shape != y.shape:
        return f"sizes {x.shape} != {y.shape}"
    bad = np.nonzero(x != y)[0]
    return f"{len(bad)} differ, first at {bad[0]}: {x[bad[0]]} != {y[bad[0]]}"


def test_random_resized_crop_bit_identical(images, tmp_path):
    rng = random.Random(18)
    sizes = [224, 224, 224, (160, 192), 32, 300, 1, (7, 500)]
    outputs = ["f32", "f32", "f32", "u8", "hwc"]
    cases = same = 0
    for case in range(330):
        name, img, raw = images[case % len(images)]
        size = rng.choice(sizes)
        lo = rng.choice([0.08, 0.08, 0.3, 0.9, 1.0])
        r0 = rng.choice([0.75, 0.5, 1.0, 0.1])
        r1 = r0 * rng.choice([16 / 9, 1.0, 2.0, 1.3333333333333333])
        output = outputs[case % len(outputs)]
        normalize = output == "f32" and case % 2 == 0
        p = rng.choice([0.5, 0.5, 1.0, 0.0])
        pipeline = (f"RandomResizedCrop({size}, scale=({lo}, 1.0), "
                    f"ratio=({r0}, {r1})), RandomHorizontalFlip(p={p})" +
                    tail_text(output, normalize))
        simd = [None, "scalar"][case % 2]
        plan, got = run_tool(img, raw, pipeline, 7 + case, case, tmp_path,
                             simd)
        left, top, w, h = plan["crop"]
        assert 0 < w <= img.width and 0 < h <= img.height
        assert left + w <= img.width and top + h <= img.height
        sh, sw = (size, size) if isinstance(size, int) else size
        ref = F.resized_crop(img, top, left, h, w, [sh, sw], BIL)
        if plan["flip"]:
            ref = F.hflip(ref)
        want = tensor_bytes(ref, output, normalize)
        cases += 1
        assert got == want, (name, pipeline, plan,
                             first_diff(got, want, output))
        same += 1
    assert same == cases >= 300


def test_resize_center_crop_bit_identical(images, tmp_path):
    rng = random.Random(5)
    cases = 0
    for case in range(120):
        name, img, raw = images[case % len(images)]
        kind = case % 4
        if kind == 0:
            s = rng.choice([256, 64, 17, 600])
            c = rng.choice([224, 32, 15, (200, 100), 700])
            geo = f"Resize({s}), CenterCrop({c})"
            ref_t = T.Compose([T.Resize(s), T.CenterCrop(c)])
        elif kind == 1:
            s = rng.choice([256, 100])
            m = s + rng.choice([1, 44, 400])
            c = rng.choice([224, 96, (50, 300)])
            geo = f"Resize({s}, max_size={m}), CenterCrop({c})"
            ref_t = T.Compose([T.Resize(s, max_size=m), T.CenterCrop(c)])
        elif kind == 2:
            c = rng.choice([224, 800, (5, 900), (600, 3), 1])
            geo = f"CenterCrop({c})"          # padding when larger
            ref_t = T.CenterCrop(c)
        else:
            hw = rng.choice([(224, 224), (100, 300), (img.height, 50),
                             (30, img.width), (img.height, img.width)])
            geo = f"Resize({hw})"
            ref_t = T.Resize(hw)
        output = ["f32", "u8", "hwc", "f32"][case % 4 if kind != 3 else 0]
        normalize = output == "f32" and case % 3 != 0
        pipeline = geo + ", RandomHorizontalFlip()" + tail_text(output,
                                                                normalize)
        plan, got = run_tool(img, raw, pipeline, 3, case, tmp_path,
                             [None, "scalar"][case % 2])
        try:
            ref = ref_t(img)
        except ValueError:      # a side of 0: infeed keeps 1 pixel
            continue
        if plan["flip"]:
            ref = F.hflip(ref)
        want = tensor_bytes(ref, output, normalize)
        assert got == want, (name, img.size, pipeline, plan,
                             first_diff(got, want, output))
        cases += 1
    assert cases >= 110


def test_refusals():
    for text, words in [
        ("ColorJitter(0.4)", "unknown transform 'ColorJitter'"),
        ("Resize(256)", "Resize(256) alone gives images of different sizes"),
        ("Normalize(0.5, 0.5), ToTensor()", "Normalize before ToTensor"),
        ("RandomResizedCrop(224, scale=(1.0, 0.5))", "not increasing"),
        ("RandomResizedCrop(224, interpolation=InterpolationMode.NEAREST)",
         "interpolation"),
    ]:
        r = subprocess.run([TOOL, "10", "10", "/dev/null", text, "0", "0",
                            "0"], capture_output=True, text=True)
        assert r.returncode == 2 and words in r.stderr, (text, r.stderr)


def plans(w, h, pipeline, n, seed=1):
    r = subprocess.run([TOOL, "-n", str(n), str(w), str(h), "/dev/null",
                        pipeline, str(seed), "0", "0"],
                       capture_output=True, text=True, check=True)
    out = []
    for line in r.stdout.splitlines():
        f = line.split()
        out.append(tuple(int(v) for v in f[3:7]) + (int(f[8]),))
    return out


@pytest.mark.parametrize("w,h,scale,ratio", [
    (500, 375, (0.08, 1.0), (3 / 4, 4 / 3)),
    (375, 500, (0.08, 1.0), (3 / 4, 4 / 3)),
    (640, 200, (0.3, 1.0), (0.5, 2.0)),
])
def test_crop_distribution_like_torchvision(w, h, scale, ratio):
    n = 2000
    ours = plans(w, h, f"RandomResizedCrop(224, scale={scale}, "
                 f"ratio={ratio}), RandomHorizontalFlip(0.3)", n)
    torch.manual_seed(0)
    img = Image.new("RGB", (w, h))
    theirs = [T.RandomResizedCrop.get_params(img, list(scale), list(ratio))
              for _ in range(n)]

    def stats(boxes):
        area = np.array([bw * bh / (w * h) for bw, bh in boxes])
        logr = np.array([math.log(bw / bh) for bw, bh in boxes])
        return area.mean(), area.std(), logr.mean(), logr.std()

    a = stats([(b[2], b[3]) for b in ours])
    b = stats([(t[3], t[2]) for t in theirs])
    assert abs(a[0] - b[0]) < 0.03, (a, b)
    assert abs(a[1] - b[1]) < 0.03, (a, b)
    assert abs(a[2] - b[2]) < 0.04, (a, b)
    assert abs(a[3] - b[3]) < 0.04, (a, b)
    # Offsets uniform over their ranges; flips at p.
    fx = [b[0] / (w - b[2]) for b in ours if b[2] < w]
    fy = [b[1] / (h - b[3]) for b in ours if b[3] < h]
    assert abs(np.mean(fx) - 0.5) < 0.04 and abs(np.mean(fy) - 0.5) < 0.04
    assert abs(np.mean([b[4] for b in ours]) - 0.3) < 0.04
    # Different indices, different boxes; the same index, the same box.
    assert len({b[:4] for b in ours}) > 0.85 * len(set(theirs))
    assert plans(w, h, f"RandomResizedCrop(224, scale={scale}, "
                 f"ratio={ratio}), RandomHorizontalFlip(0.3)", n) == ours
