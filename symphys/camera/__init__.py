"""The differentiable camera: `render(scene, camera, positions, rotations)`
(an image graph (B, H, W, 3)) and `render_state`. The modules: `geometry`
(the camera's frame and rays, NumPy), `hits` (ray hits per shape kind) and
`image` (the render graph)."""

from symphys.camera.image import as_camera, render, render_state

__all__ = ["as_camera", "render", "render_state"]
