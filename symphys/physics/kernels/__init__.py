"""The fused step: a scene's structure as data, and three stage kernels.

The reference step (`symphys.physics.step.step`) unrolls a scene into its graph:
one node per body, row and vector component, so the graph grows with the
robot. The kernels read the scene from tables instead (`layout`), so the
step is the same three nodes for a ball and a quadruped, and one compiled
kernel serves every scene:

1. rows      (state, body, world, joint, motor, geom, action; tables)
             -> (v_free (B, N, 6), rows (B, R, ROW.width), tau (B, N))
   Velocities after drag, gravity, the gyroscopic torque and direct-torque
   motors; every solver row at the current pose in sweep order; each body's
   impact fraction.
2. solve     (v_free, rows; row table) -> v (B, N, 6)
   `iterations` projected Gauss-Seidel sweeps over the rows (solver method
   "pgs"), or Newton's method to `tolerance` ("newton", docs/solver.md).
3. integrate (state, v, v_free, tau) -> next state (B, N, 18)
   x += dt v_move, R <- renormalise(exp(dt [w_move]) R), with
   v_move = v + tau (v_free - v).

Packed arrays (`layout.STATE`, `BODY`, `WORLD`, `JOINT`, `MOTOR`, `GEOM`, `ROW`
name their columns): state (B, N, 18) = [x, R row-major, v, w]; velocities
(B, N, 6) = [v, w]; parameters carry a leading axis Bp (B or 1, broadcast
against the worlds). A row r joins bodies a = rows_table[r, A] and
b = rows_table[r, B] (-1: static) and reads

    J v = jac_a . V[a] + jac_b . V[b]          (jac_b carries b's minus sign)
    new = keep (lam + mass (target - J v - gamma lam)), then clamped by its
          `Bound`: LOWER new > lower ? new : lower; BOX that, then
          new < upper ? new : upper; FRICTION with c = mu * lam[ref]
          (the normal row's impulse of this sweep): clip(new, -c, c) if
          c > 0 else 0; FREE not at all;
    V[a] += dir_a (new - lam), V[b] += dir_b (new - lam), lam = new,

with every lam 0 before the first sweep. dir = M^-1 J^T on each side
(inverse mass and world inverse inertia R diag(1/I) R^T). What each row
holds is the reference's (`symphys.physics.solver`, `symphys.physics.joints`):

- contact point: normal row (mass m_soft, gamma and target from
  `solver.contact_rows`, bound LOWER 0), two friction rows (their own
  effective mass, target 0, FRICTION with mu the combined friction),
  with rolling friction two angular rolling rows (FRICTION, mu the
  combined rolling friction);
- joint: point rows then angular rows (`joints.joint_rows`: mass the
  effective mass, target from the position error and the anchors' drift,
  keep from the joint's softness), then with limits two LOWER 0 rows;
- bearing losses and armature: a soft row (K = I_a + c dt; mass
  K m / (K + m), gamma 1 / K, target I_a q'_start / K, FREE) and a
  dry-friction row (BOX +-f dt);
- servo: one BOX row (+-max_torque dt) aiming at the clipped rate.

Each stage has its folder, and in it a Numba kernel (`*_numba`), its
pullback (`*_grad`, Numba by hand) and a JAX kernel (`*_jax`, vectorised
over worlds, loops as `lax` loops; its pullback is JAX's autodiff):

    geometry/    contact geometry: shape-pair functions and geoms (run by
                 the rows stage's kernels)
    rows/        the rows stage: contacts, joints and drives
    solve/       Gauss-Seidel (`pgs_*`) and Newton's method (`newton_*`)
    integrate/   the pose update

Beside them: `layout` and `packing` (the packed arrays and their columns),
`graph` (packing in the graph), `ops`, `stages` and `registry` (the stage
Ops), `entry_numba` and `entry_workers` (the kernels' cached C entries),
`vec_numba` and `vec_jax` (small vector algebra).
"""
