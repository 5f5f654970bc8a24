"""Texture images: what a checker or image texture looks like, as pixels.

The camera samples them; the scene reader opens image files through them,
so that a file that cannot be read is a scene error at load.
"""

from __future__ import annotations

import functools

import numpy as np

from symphys.scene.elements import Texture, TextureKind

CHECKER_TEXELS = 8  # texels along a checker square: bilinear blur over 1/8 square


@functools.lru_cache(maxsize=64)
def texture_pixels(texture: Texture) -> np.ndarray:
    """The texture's image (rows, cols, 3) in [0, 1], float64; row 0 at v = 0."""
    if texture.kind is TextureKind.CHECKER:
        square = np.add.outer(np.arange(2 * CHECKER_TEXELS) // CHECKER_TEXELS,
                              np.arange(2 * CHECKER_TEXELS) // CHECKER_TEXELS) % 2
        return np.asarray(texture.colors, float)[square]
    from matplotlib.image import imread

    image = np.asarray(imread(texture.path))
    if image.dtype.kind in "ui":
        image = image / np.iinfo(image.dtype).max
    image = np.asarray(image, float)
    if image.ndim == 2:
        image = np.repeat(image[:, :, None], 3, axis=2)
    if image.ndim != 3 or image.shape[2] not in (3, 4) or min(image.shape[:2]) < 1:
        raise ValueError(f"expected an RGB(A) or grey image, got shape {image.shape}")
    return np.clip(image[:, :, :3], 0.0, 1.0)
