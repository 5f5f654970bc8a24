"""Pullback of the contact sides that are geoms (`geoms_numba`)."""

from __future__ import annotations

from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.geometry import contact_geometry_grad as cgg
from symphys.physics.kernels.geometry.geoms_numba import RL, STATE_WIDTH, WIDTH, P, R, X, put_sides

leaf = vn.leaf


@leaf
def _scatter_side(k, i, g, s, geom, gcs, gcb, g_s, g_body, g_geom):
    """Side k's scratch cotangents back onto body i's state and row, or
    onto geom g's row (through x + R p and R R_l when on body i)."""
    if g < 0:
        for j in range(STATE_WIDTH):
            g_s[i, j] += gcs[k, j]
        for j in range(WIDTH):
            g_body[i, j] += gcb[k, j]
        return
    row, grow = geom[g], g_geom[g]
    for j in range(WIDTH):
        grow[j] += gcb[k, j]
    if i < 0:
        for j in range(3):
            grow[P + j] += gcs[k, X + j]
        for j in range(9):
            grow[RL + j] += gcs[k, R + j]
        return
    for r in range(3):
        gx = gcs[k, X + r]
        g_s[i, X + r] += gx
        for c in range(3):
            g_s[i, R + 3 * r + c] += gx * row[P + c]
            grow[P + c] += s[i, R + 3 * r + c] * gx
            g_turn = gcs[k, R + 3 * r + c]
            for m in range(3):
                g_s[i, R + 3 * r + m] += g_turn * row[RL + 3 * m + c]
                grow[RL + 3 * m + c] += s[i, R + 3 * r + m] * g_turn


@leaf
def side_geometry_vjp(kind, point, a, b, ga, gb, flip, s, body, geom, g_gap, g_n, g_ra, g_rb,
                      g_s, g_body, g_geom, cs, cb, gcs, gcb):
    """Pullback of `side_geometry`: adds into g_s (N, 18), g_body
    (N, BODY.width) and g_geom (G, GEOM.width); returns the ground height's
    cotangent. Scratch: cs, gcs (2, 18), cb, gcb (2, BODY.width)."""
    if ga < 0 and gb < 0 and not flip:
        return cgg.geometry_vjp(kind, point, a, b, s, body, g_gap, g_n, g_ra, g_rb, g_s,
                                g_body)
    ka, second = put_sides(a, b, ga, gb, flip, s, body, geom, cs, cb)
    gcs[:, :] = 0.0
    gcb[:, :] = 0.0
    if b < 0:
        g_rb = (0.0, 0.0, 0.0)      # no row reads a static side's lever arm
    g_r0, g_r1 = (g_rb, g_ra) if flip else (g_ra, g_rb)
    g_height = cgg.geometry_vjp(kind, point, 0, second, cs, cb, g_gap,
                                vn.scale(g_n, -1.0) if flip else g_n, g_r0, g_r1, gcs, gcb)
    if ga >= 0:
        for j in range(3):
            gcs[ka, X + j] += g_ra[j]
            g_s[a, X + j] -= g_ra[j]
    if gb >= 0 and b >= 0:
        for j in range(3):
            gcs[1 - ka, X + j] += g_rb[j]
            g_s[b, X + j] -= g_rb[j]
    _scatter_side(ka, a, ga, s, geom, gcs, gcb, g_s, g_body, g_geom)
    if second == 1:
        _scatter_side(1 - ka, b, gb, s, geom, gcs, gcb, g_s, g_body, g_geom)
    return g_height
