"""Fashion-MNIST-C: Hendrycks & Dietterich's (2019) common corruptions of CIFAR-10-C, for grey-scale uint8
images such as Fashion-MNIST's, at severities 1-5, vectorised over a batch and deterministic given a seed.

Hendrycks & Dietterich (2019), "Benchmarking neural network robustness to common corruptions and
perturbations" (ICLR), App. A, define 19 corruptions; their code writes each as a function of one image and a
severity. CIFAR-10-C's constants (``make_cifar_c.py`` of github.com/hendrycks/robustness, written for 32 x 32
images) are the ones used here, :data:`CORRUPTIONS`; the formulas follow the PyPI package ``imagecorruptions``
(Michaelis et al. 2019, "Benchmarking robustness in object detection"), which repackages the same code with
ImageNet-C's constants (for 224 x 224 images, far too strong at 28 x 28) and replaces ImageMagick's motion
blur by a numpy one. ``tests/test_corruptions.py`` runs that package on the same Fashion-MNIST images, with its
own constants passed to :func:`apply_corruption`, and compares pixel for pixel.

How the 32-pixel constants meet a 28 x 28 grey image: what the reference writes in pixels (noise levels, blur
radii and standard deviations, the glass blur's shuffle distance, the motion blur's kernel) or as a ratio
(zoom factors, the pixelation factor, the JPEG quality, brightness and contrast) is kept as it is, since 28 and
32 pixels differ by an eighth; what it writes as a fraction of the image side (the elastic transform's
``IMSIZE * f``) scales with the side, and what it sizes by the image (the glass blur's pass over the pixels,
the fog's fractal map, a power of two at least the side: 32 for 28) follows the image. A grey image takes the
reference's grey-scale branch where it draws per pixel (one noise field, not three) and its colour branch with
three equal channels otherwise (CIFAR-10-C's path, which keeps the channels equal). The output is truncated to
uint8 as the reference's ``np.uint8(...)`` does.

The 16 corruptions, the reference's names (``-`` may stand for ``_``), and what each does at parameter ``c``
(:data:`CORRUPTIONS` lists ``c`` per severity), x in [0, 1]:

- ``gaussian_noise``: ``x + N(0, c^2)``; ``shot_noise``: ``Poisson(c x) / c``; ``impulse_noise``: a fraction
  ``c`` of the pixels set to 0 or 1 with equal odds (scikit-image's salt and pepper); ``speckle_noise``:
  ``x + x N(0, c^2)``.
- ``gaussian_blur``: a Gaussian of standard deviation ``c`` pixels (scikit-image's ``gaussian``: nearest-edge
  padding, truncated at 4 SD); ``glass_blur``: that blur with SD ``c[0]``, then ``c[2]`` passes over the
  pixels in reverse raster order, each pixel copied from a random neighbour up to ``c[1]`` away (what the
  reference's "swap" does to a colour image), then the blur again; ``defocus_blur``: a disk of radius ``c[0]``
  antialiased by a 3 x 3 Gaussian of SD ``c[1]`` (OpenCV's reflect-101 edges); ``motion_blur``: ImageMagick's
  one-sided Gaussian kernel of radius ``c[0]`` and SD ``c[1]`` along a random angle in [-45, 45] degrees,
  edges replicated (the reference's numpy version of the ImageMagick blur CIFAR-10-C called); ``zoom_blur``:
  the mean of the image and its central zooms by each factor of ``c`` (CIFAR-10-C's zoom, which trims the
  excess evenly; the reference's trims it at the end, the same for every factor here).
- ``snow``: a thresholded, zoomed, motion-blurred noise layer added twice (once turned by 180 degrees) to a
  brightened image (the layer rounded to 8 bits after the blur, as the reference does; CIFAR-10-C rounded it
  before, to hand it to ImageMagick); ``fog``: a plasma fractal (diamond-square) of strength ``c[0]`` and
  roughness decay ``c[1]``, rescaled by the image's maximum; ``brightness``: ``x + c``; ``contrast``:
  ``(x - mean) c + mean``.
- ``elastic_transform``: CIFAR-10-C's random affine warp (three points moved by up to ``c[2]`` of the side;
  OpenCV's reflect-101 edges), then a uniform(-1, 1) displacement field smoothed by a Gaussian of SD ``c[1]``
  of the side and scaled by ``c[0]`` of the side (the reference has no affine part and other scales);
  ``pixelate``: Pillow's box filter down to ``int(c side)`` pixels and back up (CIFAR-10-C's box; the
  reference goes back up by nearest neighbour), in Pillow's own 8-bit fixed point; ``jpeg_compression``:
  Pillow's JPEG at quality ``c``, each image's blocks its own.

Left out (:data:`LEFT_OUT`): ``frost`` overlays crops of six photographs of frost that ship with the reference
(2 MB of image files calib would have to carry); ``spatter`` builds its water drops with OpenCV's Canny edge
detector, distance transform and histogram equalisation image by image (OpenCV is no dependency of calib, and
matching it would mean re-implementing all three) and colours them turquoise or brown; ``saturate``
scales the HSV saturation, which a grey image does not have: the reference's grey branch returns the image
unchanged.

Speed (``tests/benchmarks/corruptions.py``: 10,000 Fashion-MNIST test images at severity 3, one thread, on a
two-core machine shared with other jobs): from 2,300 images a second (elastic transform) and 3,300 (snow) to
125,000 (brightness), the other 13 above 7,000; 2 to 365 times the reference run image by image.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from calib._validate import check_int

__all__ = ["CORRUPTIONS", "LEFT_OUT", "apply_corruption", "corrupt_images", "corruption_names"]

_CIFAR_ZOOMS = tuple(tuple(float(z) for z in np.arange(1, top, 0.01)) for top in (1.06, 1.11, 1.16, 1.21, 1.26))

#: The parameter ``c`` of each corruption at severities 1-5: CIFAR-10-C's constants (``make_cifar_c.py``, commit
#: ca36008 of github.com/hendrycks/robustness), in the units of the module docstring; ``elastic_transform``'s
#: ``(alpha, sigma, affine)`` are fractions of the image side (CIFAR-10-C's ``IMSIZE * f``) and ``pixelate``'s
#: second entry is the up-sampling filter. E.g. ``CORRUPTIONS["gaussian_noise"] == (0.04, 0.06, 0.08, 0.09, 0.10)``.
#:
#: :meta hide-value:
CORRUPTIONS: dict[str, tuple] = {
    "gaussian_noise": (0.04, 0.06, 0.08, 0.09, 0.10),
    "shot_noise": (500, 250, 100, 75, 50),
    "impulse_noise": (0.01, 0.02, 0.03, 0.05, 0.07),
    "speckle_noise": (0.06, 0.1, 0.12, 0.16, 0.2),
    "gaussian_blur": (0.4, 0.6, 0.7, 0.8, 1.0),
    "glass_blur": ((0.05, 1, 1), (0.25, 1, 1), (0.4, 1, 1), (0.25, 1, 2), (0.4, 1, 2)),
    "defocus_blur": ((0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1, 0.2), (1.5, 0.1)),
    "motion_blur": ((6, 1), (6, 1.5), (6, 2), (8, 2), (9, 2.5)),
    "zoom_blur": _CIFAR_ZOOMS,
    "snow": ((0.1, 0.2, 1, 0.6, 8, 3, 0.95), (0.1, 0.2, 1, 0.5, 10, 4, 0.9), (0.15, 0.3, 1.75, 0.55, 10, 4, 0.9),
             (0.25, 0.3, 2.25, 0.6, 12, 6, 0.85), (0.3, 0.3, 1.25, 0.65, 14, 12, 0.8)),
    "fog": ((0.2, 3), (0.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75)),
    "brightness": (0.05, 0.1, 0.15, 0.2, 0.3),
    "contrast": (0.75, 0.5, 0.4, 0.3, 0.15),
    "elastic_transform": ((0, 0, 0.08), (0.05, 0.2, 0.07), (0.08, 0.06, 0.06), (0.1, 0.04, 0.05),
                          (0.1, 0.03, 0.03)),
    "pixelate": ((0.95, "box"), (0.9, "box"), (0.85, "box"), (0.75, "box"), (0.65, "box")),
    "jpeg_compression": (80, 65, 58, 50, 40),
}

#: The reference's corruptions that :func:`corrupt_images` does not offer, with the reason.
LEFT_OUT: dict[str, str] = {
    "frost": "it overlays photographs of frost that ship with the reference as image files (2 MB) calib does not "
             "carry",
    "spatter": "it draws its drops with OpenCV's Canny edges, distance transform and histogram equalisation, one "
               "image at a time (OpenCV is no dependency of calib), and colours them",
    "saturate": "it scales the HSV saturation, which a grey image lacks: the reference returns grey images "
                "unchanged",
}

_MIN_SIDE = 8
# Images corrupted at once: 512 keeps a 28 x 28 chunk's float64 temporaries at 3 MB, in cache; the zoom blur's
# one matrix product and the JPEG's one mosaic gain from more.
_CHUNK = 512
_CHUNKS = {"zoom_blur": 4096, "jpeg_compression": 4096}


def corruption_names() -> str:
    """The corruptions :func:`corrupt_images` knows, for error messages and ``--help``."""
    return ", ".join(CORRUPTIONS)


# ------------------------------------------------------------------------------------------------ helpers

def _gaussian(x, sigma, mode="nearest", truncate=4.0):
    """scikit-image's ``gaussian`` of each image of a batch (N, H, W): scipy's filter along the last two axes."""
    from scipy.ndimage import gaussian_filter

    sigma = np.broadcast_to(np.asarray(sigma, dtype=np.float64), (2,))
    return gaussian_filter(x, sigma=(0.0, *sigma), mode=mode, truncate=truncate)


def _clipped_zoom_matrix(side: int, factor: float) -> np.ndarray:
    """CIFAR-10-C's ``clipped_zoom`` along one axis as a (side, side) matrix: the central ``ceil(side / factor)``
    pixels zoomed by ``factor`` with scipy's ``zoom`` (linear), the excess trimmed evenly. (The reference trims
    at the end instead, the same below a zoomed excess of two pixels, which covers every factor used here.)"""
    from scipy.ndimage import zoom

    crop = int(np.ceil(side / float(factor)))
    top = (side - crop) // 2
    zoomed = zoom(np.eye(crop), (factor, 1), order=1)           # the zoom of each unit vector: linear, so exact
    trim = (len(zoomed) - side) // 2
    matrix = np.zeros((side, side))
    matrix[:, top:top + crop] = zoomed[trim:trim + side]
    return matrix


def _clipped_zoom(x, factor):
    """Each image of a batch (N, side, side) zoomed about its centre: ``A x A^T`` with A the clipped zoom."""
    n, side, _ = x.shape
    matrix = _clipped_zoom_matrix(side, factor)
    out = (x.astype(np.float64).reshape(n * side, side) @ matrix.T).reshape(n, side, side)      # along the rows
    out = matrix @ out                                                                          # ... the columns
    return out.astype(x.dtype)


def _motion_kernel_blur(x, radius, sigma, angles):
    """The reference's ``_motion_blur`` (ImageMagick's kernel) of each image along its own angle (degrees):
    ``sum_i k_i x[r + dy_i, c + dx_i]`` with edges replicated, stopping where a shift leaves the image."""
    n, height, width = x.shape
    taps = 2 * radius + 1
    kernel = np.exp(-np.arange(taps) ** 2 / (2 * sigma ** 2)) / (np.sqrt(2 * np.pi) * sigma)
    kernel = kernel / np.sum(kernel)
    radians = np.deg2rad(angles)
    point_y, point_x = taps * np.sin(radians), taps * np.cos(radians)
    hypot = np.hypot(point_y, point_x)
    rows, cols = np.arange(height), np.arange(width)
    starts = np.arange(n)[:, None, None] * (height * width)
    flat = x.reshape(-1)
    blurred = np.zeros(x.shape, dtype=np.float32)
    inside = np.ones(n, dtype=bool)
    for i in range(taps):
        dy = -np.ceil(i * point_y / hypot - 0.5).astype(np.int64)
        dx = -np.ceil(i * point_x / hypot - 0.5).astype(np.int64)
        inside &= (np.abs(dy) < height) & (np.abs(dx) < width)
        if not inside.any():
            break
        r = np.clip(rows[None, :] - dy[:, None], 0, height - 1)[:, :, None] * width
        c = np.clip(cols[None, :] - dx[:, None], 0, width - 1)[:, None, :]
        term = kernel[i] * np.take(flat, (starts + r) + c)
        if inside.all():
            blurred = blurred + term
        else:                                     # an image whose shift left it stops here (the reference breaks)
            blurred = blurred + np.where(inside[:, None, None], term, 0.0)
    return blurred


def _bilinear(image, rows, cols, mode: str):
    """scipy's ``map_coordinates(..., order=1)`` of each image of a batch (N, H, W) at its own (N, H, W)
    coordinates: linear interpolation of the image extended by ``mode``, ``"reflect"`` (d c b a | a b c d) or
    ``"mirror"`` (OpenCV's reflect-101, d c b | a b c d), the extension made by padding as far as the
    coordinates reach (numpy's "symmetric" and "reflect" pads)."""
    n, height, width = image.shape
    top, left = np.floor(rows), np.floor(cols)
    down, right = rows - top, cols - left
    reach = 1 + int(max(0.0, -top.min(), -left.min(), top.max() - (height - 1), left.max() - (width - 1)))
    padded = np.pad(image.astype(np.float64), ((0, 0), (reach, reach), (reach, reach)),
                    mode="symmetric" if mode == "reflect" else "reflect")
    wide = width + 2 * reach
    corner = (top.astype(np.intp) + reach) * wide + (left.astype(np.intp) + reach)
    corner += (np.arange(n) * (wide * (height + 2 * reach)))[:, None, None]
    flat = padded.reshape(-1)
    upper = flat[corner] * (1 - right) + flat[corner + 1] * right
    corner += wide
    lower = flat[corner] * (1 - right) + flat[corner + 1] * right
    return (upper * (1 - down) + lower * down).astype(image.dtype)


def _plasma_fractal(n, mapsize, wibbledecay, rng):
    """The reference's diamond-square ``plasma_fractal`` for ``n`` maps at once, each scaled to [0, 1]."""
    maps = np.empty((n, mapsize, mapsize))
    maps[:, 0, 0] = 0.0
    step, wibble = mapsize, 100.0

    def wibbled_mean(total):
        return total / 4 + wibble * rng.uniform(-wibble, wibble, total.shape)

    while step >= 2:
        half = step // 2
        corners = maps[:, 0:mapsize:step, 0:mapsize:step]
        squares = corners + np.roll(corners, -1, axis=1)
        squares += np.roll(squares, -1, axis=2)
        maps[:, half:mapsize:step, half:mapsize:step] = wibbled_mean(squares)
        centres = maps[:, half:mapsize:step, half:mapsize:step]
        corners = maps[:, 0:mapsize:step, 0:mapsize:step]
        across = (centres + np.roll(centres, 1, axis=1)) + (corners + np.roll(corners, -1, axis=2))
        maps[:, 0:mapsize:step, half:mapsize:step] = wibbled_mean(across)
        down = (centres + np.roll(centres, 1, axis=2)) + (corners + np.roll(corners, -1, axis=1))
        maps[:, half:mapsize:step, 0:mapsize:step] = wibbled_mean(down)
        step //= 2
        wibble /= wibbledecay
    maps -= maps.min(axis=(1, 2), keepdims=True)
    return maps / maps.max(axis=(1, 2), keepdims=True)


def _pillow_taps(n_in: int, n_out: int, box: bool) -> np.ndarray:
    """Pillow's 8-bit resampling weights from ``n_in`` to ``n_out`` pixels as an (n_out, n_in) matrix of
    22-bit fixed-point integers (``precompute_coeffs`` and ``normalize_coeffs_8bpc`` of its ``Resample.c``):
    the box filter, or nearest neighbour as a 0/1 matrix scaled to the same fixed point."""
    one = 1 << 22
    taps = np.zeros((n_out, n_in), dtype=np.float64)
    scale = n_in / n_out
    if not box:   # nearest neighbour: the source pixel Pillow itself picks, read off a resized row of indices
        from PIL import Image

        row = Image.fromarray(np.arange(n_in, dtype=np.int32)[None, :])
        # Image.NEAREST: Pillow sets the constant at import time, which its type hints do not declare (and
        # Image.Resampling, which they do, needs Pillow 9.1; calib supports 9.0)
        source = np.asarray(row.resize((n_out, 1), Image.NEAREST))[0]  # type: ignore[attr-defined]
        taps[np.arange(n_out), source] = one
        return taps
    filterscale = max(scale, 1.0)
    support, inverse = 0.5 * filterscale, 1.0 / filterscale
    for out in range(n_out):
        centre = (out + 0.5) * scale
        first = max(int(centre - support + 0.5), 0)
        last = min(int(centre + support + 0.5), n_in)
        weights = np.array([1.0 if -0.5 < (i - centre + 0.5) * inverse <= 0.5 else 0.0    # Pillow's box_filter
                            for i in range(first, last)])
        weights = weights / weights.sum()
        taps[out, first:last] = np.where(weights < 0, -0.5 + weights * one, 0.5 + weights * one).astype(np.int64)
    return taps


def _pillow_resize(x, height: int, width: int, box: bool):
    """Pillow's ``resize`` of 8-bit images (N, H, W) to (height, width): the horizontal pass, rounded to
    8 bits, then the vertical pass, exactly, as float64 sums of integers below 2^53."""
    h, w = x.shape[1:]
    out = x.astype(np.float64)
    if width != w:
        out = out @ _pillow_taps(w, width, box).T
        out = np.clip(np.floor((out + (1 << 21)) / (1 << 22)), 0, 255)
    if height != h:
        out = np.einsum("ij,njk->nik", _pillow_taps(h, height, box), out, optimize=True)
        out = np.clip(np.floor((out + (1 << 21)) / (1 << 22)), 0, 255)
    return out


# ------------------------------------------------------------------------ the corruptions, x uint8 (N, H, W)
# Each returns the corrupted batch on the scale 0-255 (a float array, or uint8 where the reference's result is
# an image), computed as the reference computes one image: the same operations, dtypes and random draws in the
# same order, so that a batch of one image with the reference's random state reproduces it.

def _gaussian_noise(x, c, rng):
    x = x / 255.0
    return np.clip(x + rng.normal(size=x.shape, scale=c), 0, 1) * 255


def _shot_noise(x, c, rng):
    x = x / 255.0
    return np.clip(rng.poisson(x * c) / float(c), 0, 1) * 255


def _impulse_noise(x, c, rng):
    x = x / 255.0                                       # scikit-image's random_noise(mode="s&p", amount=c)
    flipped = rng.random(x.shape) <= c
    salted = rng.random(x.shape) <= 0.5
    out = x.copy()
    out[flipped & salted] = 1.0
    out[flipped & ~salted] = 0.0
    return np.clip(out, 0, 1) * 255


def _speckle_noise(x, c, rng):
    x = x / 255.0
    return np.clip(x + x * rng.normal(size=x.shape, scale=c), 0, 1) * 255


def _gaussian_blur(x, c, rng):
    return np.clip(_gaussian(x / 255.0, c), 0, 1) * 255


def _glass_blur(x, c, rng):
    sigma, delta, passes = c
    n, height, width = x.shape
    x = (_gaussian(x / 255.0, sigma) * 255).astype(np.uint8)
    rows, cols = range(height - delta, delta, -1), range(width - delta, delta, -1)
    shifts = rng.integers(-delta, delta, size=(passes, len(rows), len(cols), n, 2))
    images = np.arange(n)
    for p in range(passes):                           # sequential: a pixel may be copied on after it moved
        for i, h in enumerate(rows):
            for j, w in enumerate(cols):
                dx, dy = shifts[p, i, j, :, 0], shifts[p, i, j, :, 1]
                x[images, h, w] = x[images, h + dy, w + dx]
    return np.clip(_gaussian(x / 255.0, sigma), 0, 1) * 255


def _disk(radius, alias_blur):
    """The reference's ``disk``: a normalised disk on a grid of at least 17 x 17, antialiased by OpenCV's
    ``GaussianBlur`` (3 x 3 up to radius 8, else 5 x 5; reflect-101 edges; float32), cropped to its support."""
    half = 8 if radius <= 8 else int(radius)
    size = 3 if radius <= 8 else 5
    grid = np.arange(-half, half + 1)
    xx, yy = np.meshgrid(grid, grid)
    disk = np.array(xx ** 2 + yy ** 2 <= radius ** 2, dtype=np.float32)
    disk /= np.sum(disk)
    taps = np.exp(-(np.arange(size) - size // 2) ** 2 / (2.0 * alias_blur ** 2))
    taps = (taps / taps.sum()).astype(np.float32)
    from scipy.ndimage import correlate1d

    blurred = correlate1d(correlate1d(disk, taps, axis=1, mode="mirror"), taps, axis=0, mode="mirror")
    support = np.nonzero(blurred.any(axis=0))[0]
    reach = max(half - support[0], support[-1] - half)
    return blurred[half - reach:half + reach + 1, half - reach:half + reach + 1]


def _defocus_blur(x, c, rng):
    from scipy.ndimage import correlate

    kernel = _disk(radius=c[0], alias_blur=c[1]).astype(np.float64)
    return np.clip(correlate(x / 255.0, kernel[None], mode="mirror"), 0, 1) * 255


def _motion_blur(x, c, rng):
    angles = rng.uniform(-45, 45, size=len(x))
    return np.clip(_motion_kernel_blur(x, radius=c[0], sigma=c[1], angles=angles), 0, 255)


def _zoom_blur(x, c, rng):
    x = (x / 255.0).astype(np.float32)
    n, side, _ = x.shape
    if side > 32:                       # the zooms one by one (the reference's sum, in float32)
        out = np.zeros_like(x)
        for factor in c:
            out += _clipped_zoom(x, factor)
        return np.clip((x + out) / (len(c) + 1), 0, 1) * 255
    # small images: the sum of the zooms A x A^T is one linear map of the flattened image, sum_f kron(A_f, A_f)
    total = np.eye(side * side) + sum(np.kron(m, m) for m in (_clipped_zoom_matrix(side, f) for f in c))
    out = (x.reshape(n, side * side).astype(np.float64) @ total.T).reshape(x.shape)
    return np.clip(out.astype(np.float32) / (len(c) + 1), 0, 1) * 255


def _snow(x, c, rng):
    n = len(x)
    x = np.array(x, dtype=np.float32) / 255.0
    layer = rng.normal(size=x.shape, loc=c[0], scale=c[1])
    layer = _clipped_zoom(layer, c[2])
    layer[layer < c[3]] = 0
    layer = np.clip(layer, 0, 1)
    layer = _motion_kernel_blur(layer, radius=c[4], sigma=c[5], angles=rng.uniform(-135, -45, size=n))
    layer = np.round(layer * 255).astype(np.uint8) / 255.0
    x = c[6] * x + (1 - c[6]) * np.maximum(x, x * 1.5 + 0.5)
    return np.clip(x + layer + np.rot90(layer, k=2, axes=(1, 2)), 0, 1) * 255


def _fog(x, c, rng):
    n, height, width = x.shape
    mapsize = 1 << (max(height, width) - 1).bit_length()
    x = x / 255.0
    top = x.max(axis=(1, 2), keepdims=True)
    x = x + c[0] * _plasma_fractal(n, mapsize, c[1], rng)[:, :height, :width]
    return np.clip(x * top / (top + c[0]), 0, 1) * 255


def _brightness(x, c, rng):
    return np.clip(x / 255.0 + c, 0, 1) * 255


def _contrast(x, c, rng):
    x = x / 255.0
    means = np.mean(x, axis=(1, 2), keepdims=True)
    return np.clip((x - means) * c + means, 0, 1) * 255


def _elastic_transform(x, c, rng):
    alpha, sigma, affine = (f * x.shape[-1] for f in c[:3])
    noise = c[3] if len(c) > 3 else 1.0          # CIFAR-10-C's uniform(-1, 1); the reference's 0.005 * side
    n, height, width = x.shape
    image = np.array(x, dtype=np.float32) / 255.0
    rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    if affine > 0:                               # OpenCV's getAffineTransform and warpAffine (reflect-101 edges)
        centre = np.float32([height, width]) // 2
        size = min(height, width) // 3
        source = np.float32([centre + size, [centre[0] + size, centre[1] - size], centre - size])
        target = source + rng.uniform(-affine, affine, size=(n, 3, 2)).astype(np.float32)
        ones = np.ones((3, 1))
        forward = np.linalg.solve(np.hstack([source, ones])[None], target.astype(np.float64))   # (n, 3, 2)
        matrix = np.concatenate([forward.transpose(0, 2, 1), np.tile([[[0.0, 0.0, 1.0]]], (n, 1, 1))], axis=1)
        inverse = np.linalg.inv(matrix)                                                       # dst -> src
        a = inverse[:, :2, :, None, None]                                                     # (n, 2, 3, 1, 1)
        src_x, src_y = (a[:, k, 0] * cols + a[:, k, 1] * rows + a[:, k, 2] for k in (0, 1))
        image = _bilinear(image, src_y, src_x, mode="mirror")
    dx = (_gaussian(rng.uniform(-noise, noise, size=x.shape), sigma, mode="reflect", truncate=3) * alpha)
    dy = (_gaussian(rng.uniform(-noise, noise, size=x.shape), sigma, mode="reflect", truncate=3) * alpha)
    moved = _bilinear(image, rows + dy.astype(np.float32), cols + dx.astype(np.float32), mode="reflect")
    return np.clip(moved, 0, 1) * 255


def _pixelate(x, c, rng):
    factor, upsample = c
    height, width = x.shape[1:]
    small = _pillow_resize(x, int(height * factor), int(width * factor), box=True)
    return _pillow_resize(small, height, width, box=upsample == "box")


def _jpeg_compression(x, c, rng):
    """Pillow's JPEG of each image, done as one mosaic: each image padded to whole 8 x 8 blocks by repeating its
    last row and column (what libjpeg does at an image's edge), so that no block straddles two images."""
    from io import BytesIO

    from PIL import Image

    n, height, width = x.shape
    tall, wide = -(-height // 8) * 8, -(-width // 8) * 8
    padded = np.pad(x, ((0, 0), (0, tall - height), (0, wide - width)), mode="edge")
    across = math.ceil(math.sqrt(n))       # n <= 4096: at most 64 x 64 images, far below JPEG's 65,535
    down = -(-n // across)
    mosaic = np.zeros((down * across, tall, wide), dtype=np.uint8)
    mosaic[:n] = padded
    mosaic = mosaic.reshape(down, across, tall, wide).transpose(0, 2, 1, 3).reshape(down * tall, across * wide)
    buffer = BytesIO()
    Image.fromarray(mosaic).save(buffer, "JPEG", quality=int(c))
    decoded = np.asarray(Image.open(buffer).convert("L"))
    tiles = decoded.reshape(down, tall, across, wide).transpose(0, 2, 1, 3).reshape(down * across, tall, wide)
    return tiles[:n, :height, :width]


_FUNCTIONS = {
    "gaussian_noise": _gaussian_noise, "shot_noise": _shot_noise, "impulse_noise": _impulse_noise,
    "speckle_noise": _speckle_noise, "gaussian_blur": _gaussian_blur, "glass_blur": _glass_blur,
    "defocus_blur": _defocus_blur, "motion_blur": _motion_blur, "zoom_blur": _zoom_blur, "snow": _snow,
    "fog": _fog, "brightness": _brightness, "contrast": _contrast, "elastic_transform": _elastic_transform,
    "pixelate": _pixelate, "jpeg_compression": _jpeg_compression,
}


# ------------------------------------------------------------------------------------------- the public API

def _kind(kind) -> str:
    if not isinstance(kind, str):
        raise ValueError(f"kind must be the name of a corruption, a str; got {kind!r}. Choose one of "
                         f"{corruption_names()}.")
    key = kind.strip().lower().replace("-", "_")
    if key in CORRUPTIONS:
        return key
    if key in LEFT_OUT:
        raise ValueError(f"kind={kind!r} is one of the reference's corruptions calib leaves out: {LEFT_OUT[key]}; "
                         f"choose one of {corruption_names()}.")
    raise ValueError(f"kind={kind!r} is not a corruption; choose one of {corruption_names()}.")


def _batch(images) -> tuple[np.ndarray, tuple]:
    """``images`` as a uint8 array (N, H, W), and the shape to give the result back in."""
    x = np.asarray(images)
    if x.dtype != np.uint8:
        raise ValueError(f"images must be uint8 pixels (0-255), as Dataset.x_test holds them; got dtype {x.dtype}. "
                         "Corrupt the uint8 images, then divide by 255 and normalise (intensities in [0, 1]: "
                         "multiply by 255 and round to uint8 first).")
    grey = x.ndim == 3 or (x.ndim == 4 and x.shape[1] == 1)
    if not grey:
        raise ValueError(f"images must be a batch of grey-scale images of shape (N, H, W) or (N, 1, H, W); got shape "
                         f"{x.shape}. Add a leading axis to a single image (images[None]); colour images are not "
                         "supported.")
    height, width = x.shape[-2:]
    if height != width or height < _MIN_SIDE:
        raise ValueError(f"images must be square, at least {_MIN_SIDE} x {_MIN_SIDE} pixels; got {height} x {width}.")
    return x.reshape(-1, height, width), x.shape


def apply_corruption(images, kind: str, parameter, rng) -> np.ndarray:
    """Apply the corruption ``kind`` with an explicit ``parameter`` and random generator: what
    :func:`corrupt_images` does with ``CORRUPTIONS[kind][severity - 1]``. Use it for a level between the
    published ones, or to run the reference's own constants (ImageNet-C's, as ``imagecorruptions`` holds them).

    Parameters
    ----------
    images : uint8 array of shape (N, H, W) or (N, 1, H, W)
        Square grey-scale images, at least 8 x 8 pixels.
    kind : str
        One of :data:`CORRUPTIONS`.
    parameter
        In the form of :data:`CORRUPTIONS`'s entries for ``kind``. ``elastic_transform`` also takes a fourth
        entry, the half-width of the uniform displacement noise in pixels (1 in CIFAR-10-C, ``0.005 * side`` in
        the reference); ``pixelate`` takes ``"nearest"`` as its filter as well (the reference's up-sampling).
    rng : numpy.random.Generator
        The source of every random draw (``normal``, ``poisson``, ``random``, ``uniform``, ``integers``).

    Returns
    -------
    uint8 array, the shape of ``images``
    """
    x, shape = _batch(images)
    key = _kind(kind)
    function, size = _FUNCTIONS[key], _CHUNKS.get(key, _CHUNK)
    out = np.empty(x.shape, dtype=np.uint8)
    for start in range(0, len(x), size):           # none for an empty batch
        chunk = function(x[start:start + size], parameter, rng)
        out[start:start + size] = np.clip(chunk, 0, 255).astype(np.uint8)       # truncates, as np.uint8 does
    return out.reshape(shape)


def corrupt_images(images, kind: str, severity: int, seed: int = 0) -> np.ndarray:
    """A corrupted copy of grey-scale uint8 ``images`` (Fashion-MNIST-C): one of Hendrycks & Dietterich's (2019)
    common corruptions at severity 1-5 with CIFAR-10-C's constants, for calibration under dataset shift.

    Parameters
    ----------
    images : uint8 array of shape (N, H, W) or (N, 1, H, W)
        Square grey-scale images (pixels 0-255, before any normalisation), at least 8 x 8, e.g.
        ``load_dataset("fashion-mnist").x_test``.
    kind : str
        One of :data:`CORRUPTIONS` (the reference's names; ``-`` may stand for ``_``), described in the module
        docstring; :data:`LEFT_OUT` says why the other three are not offered.
    severity : int
        1 (mild) to 5 (severe): the parameter is ``CORRUPTIONS[kind][severity - 1]``.
    seed : int
        Seeds the random draws (noise, angles, fractals, displacements) with the kind and severity, so that two
        corruptions or two severities of one seed draw independently. The same images, kind, severity and seed
        give the same result; an image's result also depends on the batch it is corrupted in.

    Returns
    -------
    uint8 array, the shape of ``images``

    Raises
    ------
    ValueError
        For images that are not uint8, not (N, H, W) or (N, 1, H, W), not square or smaller than 8 pixels; an
        unknown kind (naming the known ones, and for ``frost``, ``spatter`` and ``saturate`` why they are left
        out); a severity outside 1-5; a negative seed.
    """
    key = _kind(kind)
    severity = check_int(severity, "severity", minimum=1)
    if severity > 5:
        raise ValueError(f"severity={severity} is out of range; severities are 1 (mild) to 5 (severe).")
    seed = check_int(seed, "seed", minimum=0)
    rng = np.random.default_rng([seed, zlib.crc32(key.encode()), severity])
    return apply_corruption(images, key, CORRUPTIONS[key][severity - 1], rng)
