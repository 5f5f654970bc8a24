"""Adjoints of the Numba rows kernel's primitives (`vec_numba`, rows,
`joints_numba`), for the rows pullback (`rows_grad`); the contact
geometry's are in `contact_geometry_grad`.

Each `*_vjp` takes the primal inputs of its forward (recomputing what it
needs) and the cotangents of its outputs, and returns the cotangents of
its inputs as tuples, or adds them into the arrays it is given:
g_s (N, 18) one world's state cotangent, g_body (N, BODY.width),
g_inv_i (N, 9) the world inverse inertias', g_pose (5, 9) a joint pose's
(rows: ra, rb, error (first 3 entries), Wa, Wb). Kinks follow the forward
as written: a branch passes the cotangent to the value it took.
"""

from __future__ import annotations

from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.layout import BODY, STATE
from symphys.physics.kernels.rows import contacts_numba as cn
from symphys.physics.kernels.rows.joints_numba import (ANCHOR_A, ANCHOR_B, BALL, DA, DB, FRAME_A,
                                                       FRAME_B, HINGE, JA, JB, UNIVERSAL, _frame,
                                                       turn_parts)

jit, leaf = vn.jit, vn.leaf
X, R = STATE.at("position"), STATE.at("rotation")
INV_MASS = BODY.at("inv_mass")
P_RA, P_RB, P_ERR, P_WA, P_WB = 0, 1, 2, 3, 4


# ------------------------------------------------------------ vector adjoints

@leaf
def cross_vjp(a, b, g):
    """(g_a, g_b) of c = a x b."""
    return vn.cross(b, g), vn.cross(g, a)


@leaf
def normalize_vjp(a, g_unit, g_norm):
    """g_a of (unit, norm) = `vn.normalize(a)` (0 where the forward is
    constant: below EPS)."""
    sq = vn.dot(a, a)
    n = vn.safe_norm(a)
    inv = vn.safe_div(1.0, n)
    g_a = vn.scale(g_unit, inv)
    g_n = g_norm
    if abs(n) > vn.EPS:
        g_n -= vn.dot(a, g_unit) / (n * n)
    if sq > vn.EPS * vn.EPS:
        g_a = vn.add(g_a, vn.scale(a, g_n / n))
    return g_a


@leaf
def clip_vjp(x, lo, hi, g):
    """(g_x, g_lo, g_hi) of `vn.clip(x, lo, hi)`."""
    if x < lo:
        return 0.0, g, 0.0
    if x > hi:
        return 0.0, 0.0, g
    return g, 0.0, 0.0


@leaf
def add_outer(arr, i, at, u, v):
    """arr[i, at + 3 r + c] += u[r] v[c] (a rotation's cotangent)."""
    for r in range(3):
        for c in range(3):
            arr[i, at + 3 * r + c] += u[r] * v[c]


@leaf
def add_column(gp, p, k, v):
    """Column k of the 9-vector gp[p] += v."""
    gp[p, k] += v[0]
    gp[p, 3 + k] += v[1]
    gp[p, 6 + k] += v[2]


@leaf
def add3(gp, p, v):
    gp[p, 0] += v[0]
    gp[p, 1] += v[1]
    gp[p, 2] += v[2]


@leaf
def get3(gp, p):
    return (gp[p, 0], gp[p, 1], gp[p, 2])


@leaf
def get9(gp, p):
    return (gp[p, 0], gp[p, 1], gp[p, 2], gp[p, 3], gp[p, 4], gp[p, 5], gp[p, 6], gp[p, 7],
            gp[p, 8])


# ------------------------------------------------------------------ row adjoints

@leaf
def _iw(inv_i, i):
    return (inv_i[i, 0], inv_i[i, 1], inv_i[i, 2], inv_i[i, 3], inv_i[i, 4], inv_i[i, 5],
            inv_i[i, 6], inv_i[i, 7], inv_i[i, 8])


@leaf
def side_acc(lin, ang, inv_m, inv_i, i):
    """`joints_numba._side`'s return value (same order of operations)."""
    dw = vn.matvec(_iw(inv_i, i), ang)
    acc = 0.0
    for k in range(3):
        acc += lin[k] * (inv_m * lin[k])
    for k in range(3):
        acc += ang[k] * dw[k]
    return acc


@leaf
def side_vjp(g_row, jac_at, dir_at, lin, ang, inv_m, inv_i, i, g_acc, g_inv_i):
    """(g_lin, g_ang, g_inv_m) of `joints_numba._side`, given the cotangents
    of the row entries it wrote (g_row) and of its return value; adds the
    inverse inertia's cotangent into g_inv_i[i]."""
    iw = _iw(inv_i, i)
    dw = vn.matvec(iw, ang)
    g_dl = (g_row[dir_at] + g_acc * lin[0], g_row[dir_at + 1] + g_acc * lin[1],
            g_row[dir_at + 2] + g_acc * lin[2])
    g_dw = (g_row[dir_at + 3] + g_acc * ang[0], g_row[dir_at + 4] + g_acc * ang[1],
            g_row[dir_at + 5] + g_acc * ang[2])
    g_lin = (g_row[jac_at] + g_acc * inv_m * lin[0] + inv_m * g_dl[0],
             g_row[jac_at + 1] + g_acc * inv_m * lin[1] + inv_m * g_dl[1],
             g_row[jac_at + 2] + g_acc * inv_m * lin[2] + inv_m * g_dl[2])
    back = vn.matTvec(iw, g_dw)
    g_ang = (g_row[jac_at + 3] + g_acc * dw[0] + back[0],
             g_row[jac_at + 4] + g_acc * dw[1] + back[1],
             g_row[jac_at + 5] + g_acc * dw[2] + back[2])
    for r in range(3):
        for c in range(3):
            g_inv_i[i, 3 * r + c] += g_dw[r] * ang[c]
    return g_lin, g_ang, vn.dot(g_dl, lin)


@leaf
def _inv_eff_vjp(inv_eff, g_m):
    """Cotangent of inv_eff in m = safe_div(1, inv_eff)."""
    if abs(inv_eff) > vn.EPS:
        return -g_m / (inv_eff * inv_eff)
    return 0.0


@leaf
def point_row_vjp(g_row, g_m, d, ra, rb, a, b, body, inv_i, g_body, g_inv_i):
    """(g_d, g_ra, g_rb) of `joints_numba.point_row` (g_m: its returned
    effective mass's cotangent); inverse masses' cotangents go to g_body."""
    ang_a = vn.cross(ra, d)
    inv_eff = side_acc(d, ang_a, body[a, INV_MASS], inv_i, a)
    nd = (-d[0], -d[1], -d[2])
    ang_b = vn.cross(rb, d)
    nab = (-ang_b[0], -ang_b[1], -ang_b[2])
    if b >= 0:
        inv_eff += side_acc(nd, nab, body[b, INV_MASS], inv_i, b)
    g_acc = _inv_eff_vjp(inv_eff, g_m)
    g_lin, g_ang, g_im = side_vjp(g_row, JA, DA, d, ang_a, body[a, INV_MASS], inv_i, a, g_acc,
                                  g_inv_i)
    g_body[a, INV_MASS] += g_im
    g_ra, g_d2 = cross_vjp(ra, d, g_ang)
    g_d = vn.add(g_lin, g_d2)
    g_rb = (0.0, 0.0, 0.0)
    if b >= 0:
        g_lin, g_ang, g_im = side_vjp(g_row, JB, DB, nd, nab, body[b, INV_MASS], inv_i, b,
                                      g_acc, g_inv_i)
        g_body[b, INV_MASS] += g_im
        g_rb, g_d2 = cross_vjp(rb, d, (-g_ang[0], -g_ang[1], -g_ang[2]))
        g_d = vn.add(vn.sub(g_d, g_lin), g_d2)
    return g_d, g_ra, g_rb


@leaf
def angular_row_vjp(g_row, g_m, d, a, b, inv_i, g_inv_i):
    """g_d of `joints_numba.angular_row`."""
    zero = (0.0, 0.0, 0.0)
    nd = (-d[0], -d[1], -d[2])
    inv_eff = side_acc(zero, d, 0.0, inv_i, a)
    if b >= 0:
        inv_eff += side_acc(zero, nd, 0.0, inv_i, b)
    g_acc = _inv_eff_vjp(inv_eff, g_m)
    _, g_d, _ = side_vjp(g_row, JA, DA, zero, d, 0.0, inv_i, a, g_acc, g_inv_i)
    if b >= 0:
        _, g_ang, _ = side_vjp(g_row, JB, DB, zero, nd, 0.0, inv_i, b, g_acc, g_inv_i)
        g_d = vn.sub(g_d, g_ang)
    return g_d


@leaf
def axis_row_vjp(g_row, g_m, kind, d, pose, a, b, body, inv_i, g_body, g_inv_i, gp):
    """g_d of `joints_numba.axis_row`; the lever arms' cotangents go to gp."""
    if kind == HINGE or kind == UNIVERSAL or kind == BALL:
        return angular_row_vjp(g_row, g_m, d, a, b, inv_i, g_inv_i)
    g_d, g_ra, g_rb = point_row_vjp(g_row, g_m, d, pose[0], pose[1], a, b, body, inv_i, g_body,
                                    g_inv_i)
    add3(gp, P_RA, g_ra)
    add3(gp, P_RB, g_rb)
    return g_d


# ----------------------------------------------------------------- joint poses

@leaf
def joint_pose_vjp(s, jp, a, b, gp, g_s, g_jp):
    """Pullback of `joints_numba.joint_pose` of the cotangents gp (5, 9):
    adds into g_s (N, 18) and g_jp (JOINT.width,)."""
    rot_a = cn.rotation(s, a)
    anchor_a = (jp[ANCHOR_A], jp[ANCHOR_A + 1], jp[ANCHOR_A + 2])
    anchor_b = (jp[ANCHOR_B], jp[ANCHOR_B + 1], jp[ANCHOR_B + 2])
    g_err = get3(gp, P_ERR)
    g_world_a = vn.add(g_err, get3(gp, P_RB)) if b >= 0 else g_err
    g_ra = vn.add(get3(gp, P_RA), g_world_a)
    for k in range(3):
        g_s[a, X + k] += g_world_a[k]
    add_outer(g_s, a, R, g_ra, anchor_a)
    back = vn.matTvec(rot_a, g_ra)
    for k in range(3):
        g_jp[ANCHOR_A + k] += back[k]
    # wa = rot_a frame_a: g_rot_a = g_wa frame_a^T, g_frame_a = rot_a^T g_wa
    g_wa = get9(gp, P_WA)
    g_wb = get9(gp, P_WB)
    fa = _frame(jp, FRAME_A)
    gr = vn.matmul(g_wa, vn.transpose(fa))
    gf = vn.matmul(vn.transpose(rot_a), g_wa)
    for k in range(9):
        g_s[a, R + k] += gr[k]
        g_jp[FRAME_A + k] += gf[k]
    if b < 0:
        for k in range(3):
            g_jp[ANCHOR_B + k] -= g_err[k]
        for k in range(9):
            g_jp[FRAME_B + k] += g_wb[k]
        return
    rot_b = cn.rotation(s, b)
    g_rb = get3(gp, P_RB)
    for k in range(3):
        g_s[b, X + k] -= g_rb[k] + g_err[k]
    neg = (-g_err[0], -g_err[1], -g_err[2])
    add_outer(g_s, b, R, neg, anchor_b)
    back = vn.matTvec(rot_b, neg)
    for k in range(3):
        g_jp[ANCHOR_B + k] += back[k]
    fb = _frame(jp, FRAME_B)
    gr = vn.matmul(g_wb, vn.transpose(fb))
    gf = vn.matmul(vn.transpose(rot_b), g_wb)
    for k in range(9):
        g_s[b, R + k] += gr[k]
        g_jp[FRAME_B + k] += gf[k]


@leaf
def _atan2_vjp(y, x, g):
    r2 = x * x + y * y
    if r2 > 0:
        return g * x / r2, -g * y / r2
    return 0.0, 0.0


@leaf
def ball_turn_vjp(wa, wb, g_angle, g_axis, gp):
    """Adds the cotangents of `joints_numba.ball_turn`'s inputs (Wa, Wb)
    into gp, given those of its angle and axis."""
    v, cosine = turn_parts(wa, wb)
    sine = vn.safe_norm(v)
    g_sine, g_cos = _atan2_vjp(sine, cosine, g_angle)
    g_v = normalize_vjp(v, g_axis if sine > vn.EPS else (0.0, 0.0, 0.0), g_sine)
    turn_parts_vjp(wa, wb, g_v, g_cos, gp)


@leaf
def turn_parts_vjp(wa, wb, g_v, g_cos, gp):
    """Adds into gp the cotangents of Wa, Wb of `joints_numba.turn_parts`,
    given those of its skew part v and its cosine."""
    h = 0.5 * g_cos
    g_e = (h, -0.5 * g_v[2], 0.5 * g_v[1], 0.5 * g_v[2], h, -0.5 * g_v[0], -0.5 * g_v[1],
           0.5 * g_v[0], h)
    ga = vn.matmul(g_e, wb)
    gb = vn.matmul(vn.transpose(g_e), wa)
    for k in range(9):
        gp[P_WA, k] += ga[k]
        gp[P_WB, k] += gb[k]


@leaf
def coordinate_vjp(kind, axis, pose, g, gp):
    """Adds the cotangents of `joints_numba.coordinate`'s inputs (error,
    Wa, Wb) into gp, given the coordinate's cotangent g."""
    wa, wb = pose[3], pose[4]
    if kind == HINGE or (kind == UNIVERSAL and axis == 0):
        ref_a = vn.column(wa, 1)
        c1, c2 = vn.column(wb, 1), vn.column(wb, 2)
        g_y, g_x = _atan2_vjp(vn.dot(ref_a, c2), vn.dot(ref_a, c1), g)
        add_column(gp, P_WA, 1, vn.add(vn.scale(c2, g_y), vn.scale(c1, g_x)))
        add_column(gp, P_WB, 2, vn.scale(ref_a, g_y))
        add_column(gp, P_WB, 1, vn.scale(ref_a, g_x))
    elif kind == UNIVERSAL:
        axis_a, axis_b, ref_a = vn.column(wa, 0), vn.column(wb, 0), vn.column(wa, 1)
        across = vn.cross(ref_a, axis_b)
        g_y, g_x = _atan2_vjp(vn.dot(axis_a, across), vn.dot(axis_a, axis_b), g)
        add_column(gp, P_WA, 0, vn.add(vn.scale(across, g_y), vn.scale(axis_b, g_x)))
        g_ref, g_ab = cross_vjp(ref_a, axis_b, vn.scale(axis_a, g_y))
        add_column(gp, P_WA, 1, g_ref)
        add_column(gp, P_WB, 0, vn.add(g_ab, vn.scale(axis_a, g_x)))
    else:
        axis_b = vn.column(wb, 0)
        add3(gp, P_ERR, vn.scale(axis_b, g))
        add_column(gp, P_WB, 0, vn.scale(pose[2], g))


@leaf
def _beyond_first_order_vjp(w, r, dt, g):
    """(g_w, g_r) of `joints_numba._beyond_first_order`."""
    sinc, cosc = vn.rotation_coefficients(vn.scale(w, dt))
    turn = vn.cross(w, r)
    wt = vn.cross(w, turn)
    g_turn = vn.scale(g, (sinc - 1.0) * dt)
    g_sinc = dt * vn.dot(turn, g)
    g_wt = vn.scale(g, cosc * dt * dt)
    g_cosc = dt * dt * vn.dot(wt, g)
    g_w, g_t2 = cross_vjp(w, turn, g_wt)
    g_turn = vn.add(g_turn, g_t2)
    g_w2, g_r = cross_vjp(w, r, g_turn)
    g_w = vn.add(g_w, g_w2)
    u = vn.scale(w, dt)
    d_sinc, d_cosc = vn.rotation_coefficients_grad(vn.dot(u, u))
    g_w = vn.add(g_w, vn.scale(w, 2.0 * dt * dt * (g_sinc * d_sinc + g_cosc * d_cosc)))
    return g_w, g_r


@leaf
def drift_vjp(vel, a, b, ra, rb, dt, g, g_vel, gp):
    """Pullback of `joints_numba.drift`: the angular velocities' cotangents
    go to g_vel (N, 6), the lever arms' to gp."""
    g_w, g_r = _beyond_first_order_vjp((vel[a, 3], vel[a, 4], vel[a, 5]), ra, dt, g)
    for k in range(3):
        g_vel[a, 3 + k] += g_w[k]
    add3(gp, P_RA, g_r)
    if b >= 0:
        g_w, g_r = _beyond_first_order_vjp((vel[b, 3], vel[b, 4], vel[b, 5]), rb, dt,
                                           (-g[0], -g[1], -g[2]))
        for k in range(3):
            g_vel[b, 3 + k] += g_w[k]
        add3(gp, P_RB, g_r)

