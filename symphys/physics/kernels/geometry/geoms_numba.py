"""Contact sides that are geoms (`symphys.physics.geoms`), for the Numba rows
kernel and its pullback.

A contact item names each side's body and geom (`layout.Item.GA`, `GB`;
-1: the body's own shape). A side that is a geom is written into a
two-row scratch state (2, 18) and scratch body rows (2, BODY.width) (its
pose x + R p, R R_l; its `GEOM` row, whose first columns are BODY's), and
the ordinary per-pair geometry (`contacts_numba.geometry`) runs on those;
lever arms then gain the geom's offset from its body's centre. An item
whose routine takes b's side first (`Item.FLIP`) has its sides written
the other way round, and its normal and lever arms turned back. The
pullback runs the geometry's pullback on the scratch rows and carries
their cotangents back to the body's state and the geom's row
(`geoms_grad`).
"""

from __future__ import annotations

from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.layout import BODY, GEOM, STATE
from symphys.physics.kernels.rows import contacts_numba as cn

leaf = vn.leaf
X, R = STATE.at("position"), STATE.at("rotation")
P, RL = GEOM.at("position"), GEOM.at("rotation")
WIDTH, STATE_WIDTH = BODY.width, STATE.width


@leaf
def side_value(i, g, col, rows, geom_rows):
    """Column `col` (one of BODY's) of a contact side: geom g's (g >= 0),
    else body i's."""
    return geom_rows[g, col] if g >= 0 else rows[i, col]


@leaf
def side_add(i, g, col, value, rows, geom_rows):
    """Add `value` to column `col` of a contact side's cotangent row."""
    if g >= 0:
        geom_rows[g, col] += value
    else:
        rows[i, col] += value


@leaf
def put_side(k, i, g, s, body, geom, cs, cb):
    """Side k (0: a, 1: b) into scratch cs (2, 18) and cb (2, BODY.width):
    body i's own shape (g < 0), or geom g on body i (i < 0: the world's)."""
    if g < 0:
        for j in range(STATE_WIDTH):
            cs[k, j] = s[i, j]
        for j in range(WIDTH):
            cb[k, j] = body[i, j]
        return
    row = geom[g]
    for j in range(WIDTH):
        cb[k, j] = row[j]
    if i < 0:
        for j in range(3):
            cs[k, X + j] = row[P + j]
        for j in range(9):
            cs[k, R + j] = row[RL + j]
        return
    for r in range(3):
        acc = s[i, X + r]
        for c in range(3):
            acc += s[i, R + 3 * r + c] * row[P + c]
        cs[k, X + r] = acc
        for c in range(3):
            acc = 0.0
            for m in range(3):
                acc += s[i, R + 3 * r + m] * row[RL + 3 * m + c]
            cs[k, R + 3 * r + c] = acc


@leaf
def put_sides(a, b, ga, gb, flip, s, body, geom, cs, cb):
    """Both sides of a contact into the scratch rows, in the order its
    routine takes them: (a's row, the routine's second side: 1, or -1 for
    the ground)."""
    ka = 1 if flip else 0
    put_side(ka, a, ga, s, body, geom, cs, cb)
    if b >= 0 or gb >= 0:
        put_side(1 - ka, b, gb, s, body, geom, cs, cb)
        return ka, 1
    return ka, -1


@leaf
def _moved(r, k, i, cs, s):
    """Lever arm r from side k's shape centre turned into one from body i's."""
    return (r[0] + cs[k, X] - s[i, X], r[1] + cs[k, X + 1] - s[i, X + 1],
            r[2] + cs[k, X + 2] - s[i, X + 2])


@leaf
def side_geometry(kind, point, a, b, ga, gb, flip, s, body, geom, height, cs, cb):
    """`contacts_numba.geometry` of one contact point whose sides may be
    geoms, or which its routine takes b first (flip): (gap, normal, ra, rb),
    lever arms from the bodies' centres (rb is unused on a static side)."""
    if ga < 0 and gb < 0 and not flip:
        return cn.geometry(kind, point, a, b, s, body, height)
    ka, second = put_sides(a, b, ga, gb, flip, s, body, geom, cs, cb)
    gap, n, r0, r1 = cn.geometry(kind, point, 0, second, cs, cb, height)
    ra, rb = (r1, r0) if flip else (r0, r1)
    if flip:
        n = vn.scale(n, -1.0)
    if ga >= 0:
        ra = _moved(ra, ka, a, cs, s)
    if gb >= 0 and b >= 0:
        rb = _moved(rb, 1 - ka, b, cs, s)
    return gap, n, ra, rb
