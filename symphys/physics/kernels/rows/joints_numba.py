"""Joint poses and row Jacobians for the Numba rows kernel
(`symphys.physics.joints._pose`, `solver._jacobians` are the reference).

A row writes J and M^-1 J^T of both sides into a ROW-packed vector and
returns its effective mass 1 / (J M^-1 J^T) (0 when that is 0).
"""

from __future__ import annotations

import math

from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.layout import BODY, JOINT, JOINT_CODES, ROW
from symphys.physics.kernels.rows import contacts_numba as cn
from symphys.scene.elements import JointType

jit, leaf = vn.jit, vn.leaf
JA, JB, DA, DB = ROW.at("jac_a"), ROW.at("jac_b"), ROW.at("dir_a"), ROW.at("dir_b")
INV_MASS = BODY.at("inv_mass")
ANCHOR_A, ANCHOR_B = JOINT.at("anchor_a"), JOINT.at("anchor_b")
FRAME_A, FRAME_B = JOINT.at("frame_a"), JOINT.at("frame_b")
HINGE, UNIVERSAL = JOINT_CODES[JointType.HINGE], JOINT_CODES[JointType.UNIVERSAL]
BALL = JOINT_CODES[JointType.BALL]
X_AXIS = (1.0, 0.0, 0.0)


@leaf
def _side(row, jac_at, dir_at, lin, ang, inv_m, inv_i, i):
    """Write one side's J = [lin, ang] and M^-1 J^T; return J . M^-1 J^T."""
    iw = (inv_i[i, 0], inv_i[i, 1], inv_i[i, 2], inv_i[i, 3], inv_i[i, 4], inv_i[i, 5],
          inv_i[i, 6], inv_i[i, 7], inv_i[i, 8])
    dw = vn.matvec(iw, ang)
    acc = 0.0
    for k in range(3):
        row[jac_at + k] = lin[k]
        row[jac_at + 3 + k] = ang[k]
        row[dir_at + k] = inv_m * lin[k]
        row[dir_at + 3 + k] = dw[k]
    for k in range(6):
        acc += row[jac_at + k] * row[dir_at + k]
    return acc


@leaf
def point_row(row, d, ra, rb, a, b, body, inv_i):
    """A row on the relative velocity of the points at lever arms ra, rb
    along d; returns the effective mass."""
    inv_eff = _side(row, JA, DA, d, vn.cross(ra, d), body[a, INV_MASS], inv_i, a)
    if b >= 0:
        ang_b = vn.cross(rb, d)
        inv_eff += _side(row, JB, DB, (-d[0], -d[1], -d[2]),
                         (-ang_b[0], -ang_b[1], -ang_b[2]), body[b, INV_MASS], inv_i, b)
    return vn.safe_div(1.0, inv_eff)


@leaf
def angular_row(row, d, a, b, inv_i):
    """A row on the relative angular velocity d . (w_a - w_b)."""
    zero = (0.0, 0.0, 0.0)
    inv_eff = _side(row, JA, DA, zero, d, 0.0, inv_i, a)
    if b >= 0:
        inv_eff += _side(row, JB, DB, zero, (-d[0], -d[1], -d[2]), 0.0, inv_i, b)
    return vn.safe_div(1.0, inv_eff)


@leaf
def axis_row(row, kind, d, pose, a, b, body, inv_i):
    """A row on a joint coordinate's rate along d: angular for hinges,
    universal and ball joints, on the anchors' velocity for sliders."""
    if kind == HINGE or kind == UNIVERSAL or kind == BALL:
        return angular_row(row, d, a, b, inv_i)
    return point_row(row, d, pose[0], pose[1], a, b, body, inv_i)


@leaf
def _frame(jp, at):
    return (jp[at], jp[at + 1], jp[at + 2], jp[at + 3], jp[at + 4], jp[at + 5], jp[at + 6],
            jp[at + 7], jp[at + 8])


@leaf
def joint_pose(s, jp, a, b):
    """(ra, rb, error, Wa, Wb): the child's lever arm to its anchor, the
    parent's to the same point (0 for the world), the anchors' separation
    and both joint frames in world coordinates (`joints._pose`)."""
    rot_a = cn.rotation(s, a)
    xa = cn.position(s, a)
    ra = vn.matvec(rot_a, (jp[ANCHOR_A], jp[ANCHOR_A + 1], jp[ANCHOR_A + 2]))
    world_a = vn.add(xa, ra)
    wa = vn.matmul(rot_a, _frame(jp, FRAME_A))
    anchor_b = (jp[ANCHOR_B], jp[ANCHOR_B + 1], jp[ANCHOR_B + 2])
    if b < 0:
        return ra, (0.0, 0.0, 0.0), vn.sub(world_a, anchor_b), wa, _frame(jp, FRAME_B)
    rot_b = cn.rotation(s, b)
    xb = cn.position(s, b)
    anchor_w = vn.add(xb, vn.matvec(rot_b, anchor_b))
    wb = vn.matmul(rot_b, _frame(jp, FRAME_B))
    return ra, vn.sub(world_a, xb), vn.sub(world_a, anchor_w), wa, wb


@leaf
def _beyond_first_order(w, r, dt):
    sinc, cosc = vn.rotation_coefficients(vn.scale(w, dt))
    turn = vn.cross(w, r)
    return vn.add(vn.scale(turn, (sinc - 1.0) * dt), vn.scale(vn.cross(w, turn), cosc * dt * dt))


@leaf
def drift(vel, a, b, ra, rb, dt):
    """The anchors' separation over the step beyond first order
    (`joints._centripetal_drift`), at angular velocities vel[:, 3:]."""
    out = _beyond_first_order((vel[a, 3], vel[a, 4], vel[a, 5]), ra, dt)
    if b >= 0:
        out = vn.sub(out, _beyond_first_order((vel[b, 3], vel[b, 4], vel[b, 5]), rb, dt))
    return out


@leaf
def turn_parts(wa, wb):
    """(skew part v = sin(angle) axis, cosine) of E = Wa Wb^T
    (`joints.ball_turn`)."""
    e = vn.matmul(wa, vn.transpose(wb))
    return ((0.5 * (e[7] - e[5]), 0.5 * (e[2] - e[6]), 0.5 * (e[3] - e[1])),
            0.5 * (e[0] + e[4] + e[8] - 1.0))


@leaf
def ball_turn(wa, wb):
    """(angle, unit axis) of the child's joint frame's turn from the
    parent's (`joints.ball_turn`)."""
    v, cosine = turn_parts(wa, wb)
    axis, sine = vn.normalize(v)
    return math.atan2(sine, cosine), (X_AXIS if sine <= vn.EPS else axis)


@leaf
def limit_parts(kind, pose):
    """(q, direction) of a joint's limit rows (`joints._limit_specs`): a
    ball joint's turn angle and axis, else its coordinate and the parent's
    axis."""
    if kind == BALL:
        return ball_turn(pose[3], pose[4])
    return coordinate(kind, 0, pose), vn.column(pose[4], 0)


@leaf
def coordinate(kind, axis, pose):
    """Joint coordinate q (`joints.coordinate`)."""
    wa, wb = pose[3], pose[4]
    if kind == HINGE or (kind == UNIVERSAL and axis == 0):
        ref_a = vn.column(wa, 1)
        return math.atan2(vn.dot(ref_a, vn.column(wb, 2)), vn.dot(ref_a, vn.column(wb, 1)))
    if kind == UNIVERSAL:
        axis_a, axis_b = vn.column(wa, 0), vn.column(wb, 0)
        across = vn.cross(vn.column(wa, 1), axis_b)
        return math.atan2(vn.dot(axis_a, across), vn.dot(axis_a, axis_b))
    return vn.dot(pose[2], vn.column(wb, 0))
