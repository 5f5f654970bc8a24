"""The camera's geometry in NumPy (a camera is static): its frame, one ray
direction per sample, and the projection of world points to pixels."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from symphys.scene.elements import Camera


@dataclass(frozen=True)
class Frame:
    """A camera's orthonormal frame: forward (optical axis), right and up
    (image right and up), world vectors."""

    origin: np.ndarray
    forward: np.ndarray
    right: np.ndarray
    up: np.ndarray


def camera_frame(camera: Camera) -> Frame:
    forward = np.asarray(camera.direction, float)
    forward = forward / np.linalg.norm(forward)
    right = np.cross(forward, np.asarray(camera.up, float))
    right = right / np.linalg.norm(right)
    return Frame(np.asarray(camera.position, float), forward, right, np.cross(right, forward))


def ray_directions(camera: Camera) -> np.ndarray:
    """Unit ray directions (H * W * n * n, 3): row-major pixels (row 0 at the
    top), each pixel's n x n sub-pixel rays last."""
    frame = camera_frame(camera)
    (width, height), (cols, rows), n = camera.sensor_size, camera.resolution, camera.samples
    sub = (np.arange(n) + 0.5) / n
    x = ((np.arange(cols)[:, None] + sub[None, :]) / cols - 0.5) * width    # (W, n)
    y = (0.5 - (np.arange(rows)[:, None] + sub[None, :]) / rows) * height   # (H, n)
    # (H, W, n_y, n_x, 3)
    d = (camera.focal_length * frame.forward
         + x[None, :, None, :, None] * frame.right
         + y[:, None, :, None, None] * frame.up)
    d = d.reshape(-1, 3)
    return d / np.linalg.norm(d, axis=1, keepdims=True)


def project(camera: Camera, points) -> np.ndarray:
    """Pixel coordinates (..., 2) = (column, row) of world points (..., 3),
    pixel centres at integers, row 0 at the top (pinhole model)."""
    frame = camera_frame(camera)
    rel = np.asarray(points, float) - frame.origin
    depth = rel @ frame.forward
    x = camera.focal_length * (rel @ frame.right) / depth
    y = camera.focal_length * (rel @ frame.up) / depth
    (width, height), (cols, rows) = camera.sensor_size, camera.resolution
    return np.stack([(x / width + 0.5) * cols - 0.5, (0.5 - y / height) * rows - 0.5], axis=-1)


def plane_axes(normal) -> tuple[np.ndarray, np.ndarray]:
    """(u, v) texture axes of a plane (see `symphys.scene.elements.Plane`)."""
    n = np.asarray(normal, float) / np.linalg.norm(normal)
    up = np.array([0.0, 0.0, 1.0]) if abs(n[2]) < 0.999 else np.array([0.0, 1.0, 0.0])
    v = -(up - (up @ n) * n)
    v /= np.linalg.norm(v)
    return np.cross(n, v), v
