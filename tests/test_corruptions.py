"""calib.corruptions (Fashion-MNIST-C) against the reference, the PyPI package imagecorruptions (Hendrycks &
Dietterich's code as Michaelis et al. 2019 package it), on Fashion-MNIST test images.

The reference's corruption functions take a 28 x 28 image (only its ``corrupt`` entry point refuses images under
32 pixels), so they run on the very images calib corrupts, no padding needed: image by image, with the
reference's own constants (ImageNet-C's, transcribed below) and its own random state, the global numpy state
seeded with the image's number (scikit-image's generator for impulse noise). calib's :func:`apply_corruption`
gets the same constants and a generator in the same state, so the two must agree pixel for pixel; a batch draws
differently, and is compared with the reference in distribution. Grey images enter the reference as an "L"
image where it draws per pixel (its grey branch: one noise field, not three) and as three equal channels
otherwise (its colour branch, CIFAR-10-C's path; its grey motion blur fails on its own shape test).

To run the 2020 package today, three shims, undone after the tests: a ``pkg_resources`` stub (setuptools 81
dropped it; the reference uses it to find its frost images), ``numpy.float_`` (gone in numpy 2; its fog uses
it), and scikit-image's ``gaussian`` called with ``channel_axis`` where the reference passes ``multichannel``
(removed in scikit-image 0.19; its Gaussian and glass blurs use it).
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import types
import warnings

import numpy as np
import pytest

from calib.corruptions import CORRUPTIONS, LEFT_OUT, apply_corruption, corrupt_images
from calib.dataset_files import installed_files, read_idx

SIDE = 28

#: imagecorruptions 1.1.2's constants at severities 1-5 (ImageNet-C's), in calib's parameter form.
REFERENCE = {
    "gaussian_noise": (0.08, 0.12, 0.18, 0.26, 0.38),
    "shot_noise": (60, 25, 12, 5, 3),
    "impulse_noise": (0.03, 0.06, 0.09, 0.17, 0.27),
    "speckle_noise": (0.15, 0.2, 0.35, 0.45, 0.6),
    "gaussian_blur": (1, 2, 3, 4, 6),
    "glass_blur": ((0.7, 1, 2), (0.9, 2, 1), (1, 2, 3), (1.1, 3, 2), (1.5, 4, 2)),
    "defocus_blur": ((3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5)),
    "motion_blur": ((10, 3), (15, 5), (15, 8), (15, 12), (20, 15)),
    "zoom_blur": tuple(tuple(np.arange(1, top, step)) for top, step in
                       ((1.11, 0.01), (1.16, 0.01), (1.21, 0.02), (1.26, 0.02), (1.31, 0.03))),
    "snow": ((0.1, 0.3, 3, 0.5, 10, 4, 0.8), (0.2, 0.3, 2, 0.5, 12, 4, 0.7), (0.55, 0.3, 4, 0.9, 12, 8, 0.7),
             (0.55, 0.3, 4.5, 0.85, 12, 8, 0.65), (0.55, 0.3, 2.5, 0.85, 12, 12, 0.55)),
    "fog": ((1.5, 2), (2.0, 2), (2.5, 1.7), (2.5, 1.5), (3.0, 1.4)),
    "brightness": (0.1, 0.2, 0.3, 0.4, 0.5),
    "contrast": (0.4, 0.3, 0.2, 0.1, 0.05),
    # alpha = 250 f pixels, sigma = 0.01 of the side, no affine part, displacement noise 0.005 of the side
    "elastic_transform": tuple((250 * f / SIDE, 0.01, 0, 0.005 * SIDE) for f in (0.05, 0.065, 0.085, 0.1, 0.12)),
    "pixelate": tuple((f, "nearest") for f in (0.6, 0.5, 0.4, 0.3, 0.25)),
    "jpeg_compression": (25, 18, 15, 10, 7),
}
#: The severities compared. Snow only at 2: the reference zooms its snow layer past the side and crops it after
#: the motion blur, CIFAR-10-C (and calib) before; at severity 2 the zoom gives the side exactly.
REFERENCE_SEVERITIES = {kind: (2,) if kind == "snow" else (1, 2, 3, 4, 5) for kind in REFERENCE}
#: How a grey image enters the reference: "L" (its grey branch) or "RGB" (three equal channels).
GREY_BRANCH = {"gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise", "snow", "fog", "elastic_transform"}
DETERMINISTIC = {"gaussian_blur", "defocus_blur", "zoom_blur", "brightness", "contrast", "pixelate",
                 "jpeg_compression"}


def test_every_corruption_is_compared_and_every_reference_type_accounted_for():
    assert set(REFERENCE) == set(CORRUPTIONS)
    reference_names = {"gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur",
                       "zoom_blur", "snow", "frost", "fog", "brightness", "contrast", "elastic_transform",
                       "pixelate", "jpeg_compression", "speckle_noise", "gaussian_blur", "spatter", "saturate"}
    assert set(CORRUPTIONS) | set(LEFT_OUT) == reference_names and not set(CORRUPTIONS) & set(LEFT_OUT)


# ------------------------------------------------------------------------------------ images and reference

@pytest.fixture(scope="module")
def images():
    """50 Fashion-MNIST test images (every 200th), or smooth synthetic ones when the files are not installed."""
    files = installed_files("fashion-mnist")
    if files is not None:
        return read_idx(files["t10k-images-idx3-ubyte.gz"])[::200][:50].reshape(50, SIDE, SIDE)
    from scipy.ndimage import gaussian_filter

    # a seed no test's noise uses: images drawn from default_rng(0) would correlate with its noise
    noise = gaussian_filter(np.random.default_rng(2019).uniform(size=(50, SIDE, SIDE)), (0, 2, 2))
    scaled = (noise - noise.min()) / (noise.max() - noise.min()) * 400 - 100
    return np.clip(scaled, 0, 255).astype(np.uint8)


def load_reference(patch=None):
    """The reference as ``reference(kind, image, severity, seed) -> uint8 image``, with the module docstring's
    shims set through ``patch`` (a ``pytest.MonkeyPatch``). Raises ImportError when it is not installed."""
    patch = patch or pytest.MonkeyPatch()
    try:
        importlib.import_module("pkg_resources")
    except ImportError:
        stub = types.ModuleType("pkg_resources")
        stub.resource_filename = lambda package, path: os.path.join(
            os.path.dirname(importlib.import_module(package).__file__), path)
        patch.setitem(sys.modules, "pkg_resources", stub)
    with warnings.catch_warnings():        # its import of scipy.ndimage.interpolation, deprecated in scipy 1.8
        warnings.simplefilter("ignore", DeprecationWarning)
        ic = importlib.import_module("imagecorruptions.corruptions")
    from PIL import Image
    from skimage.filters import gaussian
    from skimage.util import random_noise

    def gaussian_today(image, sigma, multichannel=False, **options):
        return gaussian(image, sigma=sigma, channel_axis=-1 if multichannel and image.ndim == 3 else None, **options)

    patch.setattr(ic, "gaussian", gaussian_today)
    patch.setattr(np, "float_", np.float64, raising=False)

    def reference(kind, image, severity, seed):
        np.random.seed(seed)
        picture = Image.fromarray(image if kind in GREY_BRANCH else np.stack([image] * 3, axis=-1))
        with pytest.MonkeyPatch.context() as local:
            local.setattr(ic.sk.util, "random_noise", functools.partial(random_noise, rng=np.random.default_rng(seed)))
            out = np.uint8(getattr(ic, kind)(picture, severity))          # what the reference's corrupt returns
        if out.ndim == 3:
            assert np.array_equal(out, np.repeat(out[..., :1], 3, axis=-1)), f"{kind}: channels differ"
            out = out[..., 0]
        return out

    return reference


@pytest.fixture(scope="module")
def reference():
    with pytest.MonkeyPatch.context() as patch:
        try:
            loaded = load_reference(patch)
        except ImportError as error:
            pytest.skip(f"the reference imagecorruptions is not installed ({error}); it comes with the dev extra: "
                        "pip install -e '.[dev]'")
        yield loaded


class _ReferenceState:
    """A generator in the state of ``np.random.seed(seed)``, the reference's global state, with the Generator
    method calib's glass blur calls (``integers``, the legacy ``randint``)."""

    def __init__(self, seed):
        self.state = np.random.RandomState(seed)

    def __getattr__(self, name):
        return getattr(self.state, name)

    def integers(self, low, high, size=None):
        return self.state.randint(low, high, size=size)


# ------------------------------------------------------------------------------------------ the comparisons

@pytest.mark.parametrize("kind", list(REFERENCE))
def test_each_corruption_matches_the_reference_pixel_for_pixel(kind, images, reference):
    """10 images at each severity (snow: 10 at severity 2), with the reference's constants and random state; the
    deterministic corruptions as one batch. Every pixel agrees to 1 grey level, 99.9% of them exactly (measured:
    all 39,200 of every corruption exactly, but one of the zoom blur's, by 1: its zooms are summed as one
    matrix product, the reference's one by one)."""
    diffs = []
    for severity in REFERENCE_SEVERITIES[kind]:
        batch = images[(severity - 1) * 10:severity * 10]
        parameter = REFERENCE[kind][severity - 1]
        expected = np.stack([reference(kind, image, severity, seed=i) for i, image in enumerate(batch)])
        if kind in DETERMINISTIC:
            got = apply_corruption(batch, kind, parameter, rng=None)
        else:
            rng = (lambda i: np.random.default_rng(i)) if kind == "impulse_noise" else _ReferenceState
            got = np.concatenate([apply_corruption(image[None], kind, parameter, rng(i))
                                  for i, image in enumerate(batch)])
        assert got.dtype == np.uint8 and got.shape == batch.shape
        diffs.append(np.abs(got.astype(int) - expected))
    diffs = np.concatenate(diffs)
    assert diffs.max() <= 1, f"{kind}: max difference {diffs.max()} grey levels"
    assert (diffs > 0).mean() <= 1e-3
    assert np.abs(expected.astype(int) - batch).max() > 0          # the comparison saw a corruption


def test_zoom_blur_of_images_over_32_pixels_matches_the_reference(images, reference):
    """Above 32 pixels the zooms are summed one by one rather than as one linear map: 40 x 40 images."""
    big = np.pad(images[:5], ((0, 0), (6, 6), (6, 6)))
    expected = np.stack([reference("zoom_blur", image, s, seed=0) for s, image in enumerate(big, start=1)])
    got = np.stack([apply_corruption(image[None], "zoom_blur", REFERENCE["zoom_blur"][s - 1], None)[0]
                    for s, image in enumerate(big, start=1)])
    assert np.abs(got.astype(int) - expected).max() <= 1 and np.mean(got != expected) <= 1e-3


@pytest.mark.parametrize("kind", sorted(set(REFERENCE) - DETERMINISTIC))
def test_a_batch_matches_the_reference_in_distribution(kind, images, reference):
    """calib's batch of 50 (its own generator) against the reference image by image (seeds 100-149) at severity 3
    (snow 2): the per-image mean and standard deviation of the change ``corrupted - clean`` agree within 4
    standard errors, and identical images in one batch are corrupted differently."""
    severity = REFERENCE_SEVERITIES[kind][min(2, len(REFERENCE_SEVERITIES[kind]) - 1)]
    parameter = REFERENCE[kind][severity - 1]
    ours = apply_corruption(images, kind, parameter, np.random.default_rng(0)).astype(float) - images
    theirs = np.stack([reference(kind, image, severity, seed=100 + i) for i, image in enumerate(images)])
    theirs = theirs.astype(float) - images
    for statistic in (np.mean, np.std):
        a, b = statistic(ours, axis=(1, 2)), statistic(theirs, axis=(1, 2))
        z = (a.mean() - b.mean()) / np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
        assert abs(z) < 4, f"{kind}: {statistic.__name__} {a.mean():.2f} vs {b.mean():.2f} (z = {z:.1f})"
    same = apply_corruption(np.repeat(images[:1], 6, axis=0), kind, parameter, np.random.default_rng(1))
    assert len({out.tobytes() for out in same}) == 6


def _cifar_elastic_transform(image, c):
    """make_cifar_c.py's ``elastic_transform`` of a grey image (``IMSIZE`` the side), OpenCV's affine warp
    included: the part of CIFAR-10-C the reference package replaced."""
    import cv2
    from scipy.ndimage import map_coordinates
    from skimage.filters import gaussian

    image = np.array(image, dtype=np.float32) / 255.0
    shape = image.shape
    center_square = np.float32(shape) // 2
    square_size = min(shape) // 3
    pts1 = np.float32([center_square + square_size, [center_square[0] + square_size, center_square[1] - square_size],
                       center_square - square_size])
    pts2 = pts1 + np.random.uniform(-c[2], c[2], size=pts1.shape).astype(np.float32)
    image = cv2.warpAffine(image, cv2.getAffineTransform(pts1, pts2), shape[::-1], borderMode=cv2.BORDER_REFLECT_101)
    dx = (gaussian(np.random.uniform(-1, 1, size=shape), c[1], mode="reflect", truncate=3) * c[0]).astype(np.float32)
    dy = (gaussian(np.random.uniform(-1, 1, size=shape), c[1], mode="reflect", truncate=3) * c[0]).astype(np.float32)
    x, y = np.meshgrid(np.arange(shape[1]), np.arange(shape[0]))
    indices = np.reshape(y + dy, (-1, 1)), np.reshape(x + dx, (-1, 1))
    return np.uint8(np.clip(map_coordinates(image, indices, order=1, mode="reflect").reshape(shape), 0, 1) * 255)


def test_the_parts_of_cifar_10_c_the_reference_changed(images, reference):
    """CIFAR-10-C's pixelation up-samples with Pillow's box filter (the reference: nearest neighbour), and its
    elastic transform starts with a random affine warp (OpenCV's): calib against that code at CIFAR-10-C's own
    constants, 10 images a severity (measured: all 39,200 pixels exactly; with all 50 images at every severity,
    one pixel of 196,000 differed, by 1)."""
    pytest.importorskip("cv2", reason="OpenCV comes with the reference (the dev extra)")
    from PIL import Image

    diffs = []
    for severity, (factor, _) in enumerate(CORRUPTIONS["pixelate"], start=1):
        small = int(SIDE * factor)
        batch = images[(severity - 1) * 10:severity * 10]
        expected = [np.asarray(Image.fromarray(im).resize((small, small), Image.BOX).resize((SIDE, SIDE), Image.BOX))
                    for im in batch]
        assert np.array_equal(corrupt_images(batch, "pixelate", severity), np.stack(expected))
        parameter = CORRUPTIONS["elastic_transform"][severity - 1]
        for i, image in enumerate(batch):
            np.random.seed(i)
            expected = _cifar_elastic_transform(image, [f * SIDE for f in parameter])
            got = apply_corruption(image[None], "elastic_transform", parameter, _ReferenceState(i))[0]
            diffs.append(np.abs(got.astype(int) - expected))
    assert np.max(diffs) <= 1 and np.mean(np.array(diffs) > 0) <= 1e-3


# ------------------------------------------------------------------------------------------ the public API

def test_corrupt_images_keeps_shape_and_dtype_and_is_seeded(images):
    x = images[:8, None]                                                   # (N, 1, 28, 28)
    for kind in CORRUPTIONS:
        out = corrupt_images(x, kind, 3, seed=5)
        assert out.shape == x.shape and out.dtype == np.uint8
        assert np.array_equal(out, corrupt_images(x, kind.replace("_", "-"), 3, seed=5))
        assert np.array_equal(out, corrupt_images(x, kind, 3, seed=5))
        assert np.array_equal(out, corrupt_images(x, kind, 3, seed=6)) == (kind in DETERMINISTIC), kind
    grey = np.full((4, SIDE, SIDE), 128, dtype=np.uint8)      # no clipping at 128 +- 4 SD of 0.04 and 0.08 x 255
    mild, strong = (corrupt_images(grey, "gaussian_noise", s, seed=0).astype(float) - 128 for s in (1, 3))
    assert np.std(strong) / np.std(mild) == pytest.approx(2.0, rel=0.05)       # CIFAR-10-C's 0.08 / 0.04
    assert abs(np.corrcoef(mild.ravel(), strong.ravel())[0, 1]) < 0.05         # severities draw independently


def test_severity_5_is_stronger_than_severity_1(images):
    """Mean |corrupted - clean| grows from severity 1 to 5 for every corruption but the elastic transform, whose
    CIFAR-10-C levels trade a shrinking affine warp for a growing elastic field."""
    change = {kind: [np.abs(corrupt_images(images[:20], kind, s).astype(int) - images[:20]).mean() for s in (1, 5)]
              for kind in CORRUPTIONS if kind != "elastic_transform"}
    assert {kind for kind, (mild, severe) in change.items() if not severe > mild} == set()


def test_small_and_empty_batches():
    x = np.random.default_rng(0).integers(0, 256, size=(3, 8, 8), dtype=np.uint8)
    for kind in CORRUPTIONS:
        assert corrupt_images(x, kind, 5).shape == (3, 8, 8)
    assert corrupt_images(np.zeros((0, 1, SIDE, SIDE), np.uint8), "fog", 2).shape == (0, 1, SIDE, SIDE)
    many = np.repeat(x[:1], 1300, axis=0)                            # more than one chunk (512 images)
    out = corrupt_images(many, "defocus_blur", 5)
    assert np.array_equal(out, np.repeat(out[:1], 1300, axis=0)) and not np.array_equal(out[0], x[0])


def test_bad_input_is_explained(images):
    with pytest.raises(ValueError, match="must be uint8 pixels.*got dtype float64.*multiply by 255"):
        corrupt_images(images / 255.0, "contrast", 1)
    with pytest.raises(ValueError, match=r"shape \(N, H, W\) or \(N, 1, H, W\); got shape \(28, 28\).*images\[None\]"):
        corrupt_images(images[0], "contrast", 1)
    with pytest.raises(ValueError, match=r"got shape \(2, 3, 28, 28\)"):
        corrupt_images(np.zeros((2, 3, SIDE, SIDE), np.uint8), "contrast", 1)
    with pytest.raises(ValueError, match="must be square, at least 8 x 8 pixels; got 28 x 20"):
        corrupt_images(images[:, :, :20], "contrast", 1)
    with pytest.raises(ValueError, match="got 6 x 6"):
        corrupt_images(images[:, :6, :6], "contrast", 1)
    with pytest.raises(ValueError, match="kind='blur' is not a corruption; choose one of gaussian_noise, shot_noise"):
        corrupt_images(images, "blur", 1)
    with pytest.raises(ValueError, match="kind='frost' is one of the reference's corruptions calib leaves out: "
                                         "it overlays photographs"):
        corrupt_images(images, "frost", 1)
    with pytest.raises(ValueError, match="kind must be the name of a corruption"):
        corrupt_images(images, 3, 1)
    for severity in (0, 6, 2.5):
        with pytest.raises(ValueError, match="severit"):
            corrupt_images(images, "contrast", severity)
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        corrupt_images(images, "contrast", 1, seed=-1)
