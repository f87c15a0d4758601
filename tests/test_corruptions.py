"""calib.data.corrupt_images: the capstone's shifted Fashion-MNIST, checked against closed forms."""

import numpy as np
import pytest

from calib.data import CORRUPTIONS, corrupt_images


def _images(n=3, side=9, seed=0):
    return np.random.default_rng(seed).uniform(0.2, 0.8, size=(n, side, side))


def test_contrast_is_the_affine_map_about_each_images_mean():
    x = _images()
    out = corrupt_images(x, "contrast", 2)
    mean = x.mean(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(out, (x - mean) * 0.3 + mean, rtol=0, atol=1e-15)   # inside [0, 1]: no clipping
    np.testing.assert_allclose(out.mean(axis=(1, 2)), mean.ravel(), atol=1e-15)


def test_noise_has_the_stated_spread_is_seeded_and_blur_keeps_the_mass():
    x = np.full((200, 28, 28), 0.5)
    noisy = corrupt_images(x, "gaussian-noise", 1, seed=3)
    assert abs((noisy - x).std() - CORRUPTIONS["gaussian-noise"][0]) < 1e-3       # 0.08, no clipping at 0.5 +- 5 s
    np.testing.assert_array_equal(noisy, corrupt_images(x, "gaussian-noise", 1, seed=3))
    assert not np.array_equal(noisy, corrupt_images(x, "gaussian-noise", 1, seed=4))
    dot = np.zeros((1, 21, 21))
    dot[0, 10, 10] = 1.0
    blurred = corrupt_images(dot, "gaussian-blur", 3)                              # sigma = 1 pixel
    assert blurred.sum() == pytest.approx(1.0, abs=1e-12)
    ratio = blurred[0, 10, 11] / blurred[0, 10, 10]                                # a sampled Gaussian: e^(-1/2)
    assert ratio == pytest.approx(np.exp(-0.5), rel=0.02)


def test_bad_input_is_explained():
    with pytest.raises(ValueError, match="divide uint8 pixels by 255"):
        corrupt_images(np.full((1, 4, 4), 255.0), "contrast", 1)
    with pytest.raises(ValueError, match="kind='fog' is not a corruption"):
        corrupt_images(_images(), "fog", 1)
    with pytest.raises(ValueError, match="severities are 1"):
        corrupt_images(_images(), "contrast", 6)
