# SPDX-License-Identifier: MIT
"""Image transforms that infeedd's workers run, named as torchvision's.

``infeed.DataLoader(opts, "imagenet-train", batch_size=64, shuffle=True,
transform=T)`` takes ``T`` built from these classes, which take the same
arguments as ``torchvision.transforms`` (0.14), so torchvision need not be
installed::

    from infeed import transforms as T
    train = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
                       T.ToTensor(),
                       T.Normalize([0.485, 0.456, 0.406],
                                   [0.229, 0.224, 0.225])])

or a ``torchvision.transforms.Compose`` of the same transforms, translated
here; any other transform is refused by name.  They describe what the
workers do, in C, before the step reaches Python: they are not called on
images in this process.  Crops and flips are drawn from (seed, epoch,
index), so they are the same whatever the number of workers, but not the
ones torch's own random generator would draw.

A pipeline ending in ``ToTensor()`` (and ``Normalize``) gives float32
[3, H, W] samples; one ending in ``PILToTensor()`` gives uint8 [3, H, W]
(normalise on the device); one with neither gives uint8 [H, W, 3].
"""

import math

__all__ = ["Compose", "RandomResizedCrop", "Resize", "CenterCrop",
           "RandomHorizontalFlip", "ToTensor", "PILToTensor", "Normalize",
           "pipeline"]

# What infeedd runs; the message for anything else names them.
_RUNS = ("RandomResizedCrop, Resize, CenterCrop, RandomHorizontalFlip, "
         "ToTensor, PILToTensor and Normalize")


def _number(x):
    """A number as infeedd's parser reads it: ints plain, floats exact."""
    if isinstance(x, bool):
        raise TypeError(f"expected a number, not {x!r}")
    if isinstance(x, int):
        return str(x)
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"expected a finite number, not {x!r}")
    return repr(x)


def _numbers(seq, brackets="()"):
    """A tuple of numbers, e.g. (0.08, 1.0); one alone as a list, [224]."""
    items = list(seq)
    if len(items) == 1:
        brackets = "[]"
    return brackets[0] + ", ".join(_number(v) for v in items) + brackets[1]


def _size(size, square=False):
    """torchvision's size: an int, or a sequence of one or two ints.  The
    text is canonical: (n,) is n, and so is (n, n) for a crop (@square),
    so a pipeline reads the same however it was built."""
    if isinstance(size, int) and not isinstance(size, bool):
        return str(size)
    size = tuple(size)
    if len(size) not in (1, 2) or not all(isinstance(v, int) for v in size):
        raise ValueError(f"size must be an int or a sequence of one or two "
                         f"ints, not {size!r}")
    if len(size) == 1 or (square and size[0] == size[1]):
        return str(size[0])
    return _numbers(size)


def _interpolation(mode):
    """Only bilinear, as infeedd resamples with Pillow's filter."""
    name = getattr(mode, "value", mode)
    if name in ("bilinear", 2):
        return
    raise ValueError(f"interpolation {mode!r}: infeedd resizes with "
                     f"bilinear interpolation (Pillow's antialiased "
                     f"filter, torchvision's default) only")


def _antialias(antialias):
    if antialias not in (None, True):
        raise ValueError("antialias=False: infeedd resizes PIL images' "
                         "way, which always antialiases")


class _Transform:
    """One transform of a pipeline: its text is what infeedd parses."""

    def _text(self):
        raise NotImplementedError

    def __repr__(self):
        return self._text()

    def __call__(self, img):
        raise TypeError(f"{type(self).__name__} describes what infeedd's "
                        f"workers do to each image: pass it as "
                        f"infeed.DataLoader(..., transform=...)")


class Compose(_Transform):
    """A sequence of transforms, in order."""

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def _text(self):
        return ", ".join(pipeline(t) for t in self.transforms)


class RandomResizedCrop(_Transform):
    """A random crop of the image, resized to ``size``."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation="bilinear", antialias=None):
        _interpolation(interpolation)
        _antialias(antialias)
        self.size = size
        self.scale = tuple(scale)
        self.ratio = tuple(ratio)

    def _text(self):
        return (f"RandomResizedCrop({_size(self.size, square=True)}, "
                f"scale={_numbers(self.scale)}, "
                f"ratio={_numbers(self.ratio)})")


class Resize(_Transform):
    """Resize the short side to ``size`` (an int), or to ``(h, w)``."""

    def __init__(self, size, interpolation="bilinear", max_size=None,
                 antialias=None):
        _interpolation(interpolation)
        _antialias(antialias)
        self.size = size
        self.max_size = max_size

    def _text(self):
        extra = "" if self.max_size is None else \
            f", max_size={_number(int(self.max_size))}"
        return f"Resize({_size(self.size)}{extra})"


class CenterCrop(_Transform):
    """The centre ``size`` of the image, zero-padded where it is smaller."""

    def __init__(self, size):
        self.size = size

    def _text(self):
        return f"CenterCrop({_size(self.size, square=True)})"


class RandomHorizontalFlip(_Transform):
    """Mirror the image with probability ``p``."""

    def __init__(self, p=0.5):
        self.p = p

    def _text(self):
        return f"RandomHorizontalFlip(p={_number(float(self.p))})"


class ToTensor(_Transform):
    """float32 [3, H, W] in [0, 1]."""

    def _text(self):
        return "ToTensor()"


class PILToTensor(_Transform):
    """uint8 [3, H, W], as decoded."""

    def _text(self):
        return "PILToTensor()"


class Normalize(_Transform):
    """(x - mean[c]) / std[c] per channel, after ToTensor."""

    def __init__(self, mean, std, inplace=False):
        self.mean = [float(v) for v in _list(mean)]
        self.std = [float(v) for v in _list(std)]

    def _text(self):
        return (f"Normalize(mean={_numbers(self.mean, '[]')}, "
                f"std={_numbers(self.std, '[]')})")


def _list(v):
    """A number, sequence or tensor as a list of floats."""
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, (int, float)):
        return [v]
    return list(v)


def _from_torchvision(t):
    """The infeed transform for torchvision's @t, or a clear refusal."""
    name = type(t).__name__
    if name == "Compose":
        return Compose([_from_torchvision(x) for x in t.transforms])
    if name == "RandomResizedCrop":
        return RandomResizedCrop(tuple(t.size), t.scale, t.ratio,
                                 t.interpolation,
                                 getattr(t, "antialias", None))
    if name == "Resize":
        return Resize(t.size, t.interpolation, t.max_size,
                      getattr(t, "antialias", None))
    if name == "CenterCrop":
        return CenterCrop(tuple(t.size))
    if name == "RandomHorizontalFlip":
        return RandomHorizontalFlip(t.p)
    if name == "ToTensor":
        return ToTensor()
    if name == "PILToTensor":
        return PILToTensor()
    if name == "Normalize":
        return Normalize(t.mean, t.std)
    raise ValueError(f"torchvision's {name} cannot run in infeedd: its "
                     f"workers run {_RUNS}; apply {name} to the step "
                     f"after it arrives")


def pipeline(transform):
    """The text infeedd parses for @transform.

    @transform is an ``infeed.transforms`` transform or ``Compose``, a
    ``torchvision.transforms`` one, or already the text.
    """
    if isinstance(transform, str):
        return transform
    if isinstance(transform, _Transform):
        return transform._text()
    module = type(transform).__module__ or ""
    if module.startswith("torchvision.transforms"):
        return _from_torchvision(transform)._text()
    raise TypeError(f"transform must be built from infeed.transforms or "
                    f"torchvision.transforms ({_RUNS}), or be their text; "
                    f"not {type(transform).__name__}: infeedd's workers "
                    f"cannot run Python code")
