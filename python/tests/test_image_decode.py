# SPDX-License-Identifier: MIT
"""infeed's image decoders against PIL on real photographs: JPEGs and PNGs
made here from skimage's pictures (several qualities, subsamplings, sizes,
greyscale, CMYK, progressive, 16-bit and palette PNGs), decoded whole and
in random regions by tests/daemon/image-decode-tool
($INFEED_IMAGE_DECODE_TOOL), must equal Image.open(f).convert("RGB") bit
for bit.  Skipped without PIL or without the tool."""

import io
import os
import random
import subprocess

import pytest

Image = pytest.importorskip("PIL.Image")
np = pytest.importorskip("numpy")

PHOTOS = "/usr/lib/python3/dist-packages/skimage/data"
TOOL = os.environ.get("INFEED_IMAGE_DECODE_TOOL")

pytestmark = pytest.mark.skipif(
    TOOL is None or not os.path.isdir(PHOTOS),
    reason="needs $INFEED_IMAGE_DECODE_TOOL and skimage's photographs "
           "(python3-skimage)")


def photo(name):
    return Image.open(os.path.join(PHOTOS, name)).convert("RGB")


def save(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def variants():
    """(name, encoded bytes): the images to compare, made deterministically."""
    out = []
    pics = {n: photo(n) for n in ("astronaut.png", "chelsea.png",
                                  "coffee.png", "rocket.jpg", "motorcycle_left.png")}
    # ImageNet-shaped: 500x375 and 375x500, q85-95, 4:2:0.
    out.append(("imagenet-500x375-q90.jpg", save(
        pics["coffee.png"].resize((500, 375), Image.BILINEAR), "JPEG",
        quality=90, subsampling=2)))
    out.append(("imagenet-375x500-q85.jpg", save(
        pics["rocket.jpg"].resize((375, 500), Image.BILINEAR), "JPEG",
        quality=85, subsampling=2)))
    sizes = [(None, None), (331, 217), (256, 255), (97, 61)]
    for i, (name, im) in enumerate(sorted(pics.items())):
        for j, (w, h) in enumerate(sizes):
            if w is not None:
                im2 = im.crop((j, 2 * j, j + w, 2 * j + h))
            else:
                im2 = im
            q = (75, 85, 90, 95)[(i + j) % 4]
            ss = (0, 1, 2)[(i + j) % 3]
            stem = f"{name.split('.')[0]}-{im2.width}x{im2.height}"
            out.append((f"{stem}-q{q}-ss{ss}.jpg",
                        save(im2, "JPEG", quality=q, subsampling=ss)))
            if j < 2:
                out.append((f"{stem}-prog.jpg", save(
                    im2, "JPEG", quality=q, progressive=True)))
                out.append((f"{stem}-opt.jpg", save(
                    im2, "JPEG", quality=q, optimize=True)))
        out.append((f"{name}-grey.jpg", save(im.convert("L"), "JPEG",
                                             quality=90)))
        out.append((f"{name}-cmyk.jpg", save(im.convert("CMYK"), "JPEG",
                                             quality=92)))
        out.append((f"{name}.png", save(im, "PNG")))
        out.append((f"{name}-rgba.png", save(im.convert("RGBA"), "PNG")))
        out.append((f"{name}-p.png", save(im.convert(
            "P", palette=Image.ADAPTIVE, colors=97), "PNG")))
        out.append((f"{name}-l.png", save(im.convert("L"), "PNG")))
        arr = np.asarray(im.convert("L"), dtype=np.uint16)
        out.append((f"{name}-i16.png", save(
            Image.fromarray(arr * 3, mode="I;16"), "PNG")))
    return out


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    d = tmp_path_factory.mktemp("images")
    out = []
    for name, data in variants():
        p = d / name
        p.write_bytes(data)
        im = Image.open(io.BytesIO(data))
        fmt = "jpeg" if im.format == "JPEG" else "png"
        rgb = np.asarray(im.convert("RGB"))
        out.append((p, fmt, rgb))
    return out


def decode(path, region=None):
    args = [TOOL, str(path)] + [str(v) for v in (region or ())]
    r = subprocess.run(args, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


def test_info_names_format_and_size(images):
    for path, fmt, rgb in images:
        r = subprocess.run([TOOL, "--info", str(path)], capture_output=True,
                           text=True, check=True)
        assert r.stdout == f"{fmt} {rgb.shape[1]} {rgb.shape[0]}\n"


def test_full_decodes_equal_pil(images):
    assert len(images) >= 50
    bad = [p.name for p, _, rgb in images if decode(p) != rgb.tobytes()]
    assert bad == [], f"{len(bad)} of {len(images)} differ from PIL"


def test_random_regions_equal_pil(images):
    rnd = random.Random(18)
    n = 0
    for path, _, rgb in images:
        h_img, w_img = rgb.shape[:2]
        for _ in range(4):
            # RandomResizedCrop-like: 8-100 % of the area, ratio 3/4-4/3,
            # and now and then any rectangle at all.
            if rnd.random() < 0.75:
                area = w_img * h_img * rnd.uniform(0.08, 1.0)
                ar = rnd.uniform(3 / 4, 4 / 3)
                w = max(1, min(w_img, round((area * ar) ** 0.5)))
                h = max(1, min(h_img, round((area / ar) ** 0.5)))
            else:
                w = rnd.randint(1, w_img)
                h = rnd.randint(1, h_img)
            x = rnd.randint(0, w_img - w)
            y = rnd.randint(0, h_img - h)
            got = decode(path, (x, y, w, h))
            want = np.ascontiguousarray(rgb[y:y + h, x:x + w]).tobytes()
            assert got == want, f"{path.name}: region {w}x{h} at ({x},{y})"
            n += 1
    assert n >= 50


def test_cut_and_foreign_files_fail(tmp_path, images):
    path = next(p for p, fmt, _ in images if fmt == "jpeg")
    data = path.read_bytes()
    cases = {
        "cut.jpg": (data[:len(data) // 2], "truncated JPEG data"),
        "x.gif": (b"GIF89a" + bytes(20),
                  "not a JPEG or PNG image (starts with 47 49 46 38)"),
        "empty.jpg": (b"", "not a JPEG or PNG image (empty)"),
    }
    for name, (blob, phrase) in cases.items():
        p = tmp_path / name
        p.write_bytes(blob)
        r = subprocess.run([TOOL, str(p)], capture_output=True, text=True)
        assert r.returncode == 1 and r.stdout == ""
        assert phrase in r.stderr, r.stderr
