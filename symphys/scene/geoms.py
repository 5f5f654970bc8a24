"""Reading a scene file's geoms (`Geom`) and its contact pairs, which name
colliders: a body (its own shape), a geom, or the ground.

A pair is stored oriented: a geom fixed to the world is always b, and
otherwise (shape of a, shape of b or GROUND) is a key of `CONTACT_KINDS`;
a moving box against a fixed capsule or sphere, or a moving sphere
against a fixed capsule, keeps the moving one as a and its routine takes
the two swapped (`contact_kind`).
"""

from __future__ import annotations

from dataclasses import dataclass

from symphys.errors import SceneError, closest
from symphys.scene.elements import (CONTACT_KINDS, GROUND, WORLD, ContactPair, Geom, Shape,
                                    contact_kind)
from symphys.scene.fields import GEOM_KEYS, Fields, named_items, quaternion, shape_and_sizes


def read_geoms(doc, source: str, bodies) -> tuple[Geom, ...]:
    """The `geoms` list of a scene document; names unique among bodies and
    geoms, each on a body of `bodies` or on the world. Position and
    quaternion default to the body's (the world's origin and axes)."""
    body_names = [b.name for b in bodies]
    poses = {b.name: (b.position, b.quaternion) for b in bodies}
    poses[WORLD] = ((0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0))
    geoms, seen = [], set()
    for i, entry in enumerate(named_items(doc, source, "geoms", "geom")):
        label = entry.get("name") if isinstance(entry, dict) else None
        r = Fields(entry, source, f"geom '{label}'" if isinstance(label, str) else f"geoms[{i}]",
                   GEOM_KEYS)
        name = r.string("name")
        if name in (WORLD, GROUND):
            r.fail("name", f"'{name}' is reserved")
        if name in body_names:
            r.fail("name", f"'{name}' is already a body's name; a geom's name must differ "
                   "from every body's and geom's")
        if name in seen:
            r.fail("name", "duplicate geom name")
        seen.add(name)
        body = r.string("body")
        if body != WORLD and body not in body_names:
            r.fail("body", f"unknown body '{body}'{closest(body, body_names)}; use "
                   f"\"{WORLD}\" for a geom fixed to the world")
        shape, radius, size, length = shape_and_sizes(r)
        geoms.append(Geom(
            name=name, body=body, shape=shape, radius=radius, size=size, length=length,
            position=r.vector("position", 3, poses[body][0]),
            quaternion=quaternion(r, default=poses[body][1]),
            friction=r.number("friction", 1.0), restitution=r.number("restitution", 0.0),
            rolling_friction=r.number("rolling_friction", 0.0),
            color=r.color("color", None) if r.has("color") else None))
    return tuple(geoms)


@dataclass(frozen=True)
class Collider:
    """A contact pair's side: a body's own shape, a geom, or the ground."""

    name: str
    shape: Shape
    owner: str          # the body it moves with, or WORLD


def _colliders(bodies, geoms) -> dict[str, Collider]:
    out = {b.name: Collider(b.name, b.shape, b.name) for b in bodies}
    out.update((g.name, Collider(g.name, g.shape, g.body)) for g in geoms)
    return out


def oriented(a: Collider, b: Collider) -> ContactPair | None:
    """The pair of two colliders, a world geom as b and otherwise in the
    order `CONTACT_KINDS` has it (a moving box against a fixed capsule
    stays so: `contact_kind` says its routine takes them swapped), or None
    when no contact routine takes them."""
    if a.owner == WORLD:
        a, b = b, a
    if b.owner != WORLD and (b.shape, a.shape) in CONTACT_KINDS \
            and (a.shape, b.shape) not in CONTACT_KINDS:
        a, b = b, a
    return ContactPair(a.name, b.name) if contact_kind(a.shape, b.shape) else None


def auto_contacts(bodies, has_ground: bool, joints=(), geoms=()) -> tuple[ContactPair, ...]:
    """Every body against the ground and every pair of bodies with a contact
    routine not joined by a joint (in that order); then every moving geom
    against the ground, every pair of colliders on different bodies not
    joined by a joint (with at least one geom), and every moving collider
    against every world geom."""
    pairs = []
    if has_ground:
        pairs += [ContactPair(b.name, GROUND) for b in bodies]
    joined = {frozenset((j.parent, j.child)) for j in joints}
    by_name = _colliders(bodies, geoms)
    for i, a in enumerate(bodies):
        for b in bodies[i + 1:]:
            if frozenset((a.name, b.name)) not in joined:
                pair = oriented(by_name[a.name], by_name[b.name])
                pairs += [pair] if pair else []
    moving = [g for g in geoms if g.body != WORLD]
    if has_ground:
        pairs += [ContactPair(g.name, GROUND) for g in moving]
    movers = [by_name[n] for n in [b.name for b in bodies] + [g.name for g in moving]]
    for i, a in enumerate(movers):
        for b in movers[max(i + 1, len(bodies)):]:
            if a.owner != b.owner and frozenset((a.owner, b.owner)) not in joined:
                pair = oriented(a, b)
                pairs += [pair] if pair else []
    for wall in (g for g in geoms if g.body == WORLD):
        for a in movers:
            pair = oriented(a, by_name[wall.name])
            pairs += [pair] if pair else []
    return tuple(pairs)


def read_contacts(doc, source: str, bodies, has_ground, joints=(),
                  geoms=()) -> tuple[ContactPair, ...]:
    """The `contacts` field: "auto" (or absent) or a list of {"a", "b"}."""
    if doc is None or doc == "auto":
        return auto_contacts(bodies, has_ground, joints, geoms)
    if not isinstance(doc, list):
        raise SceneError("expected \"auto\" or a list of {\"a\", \"b\"}",
                         source=source, field="contacts")
    by_name = _colliders(bodies, geoms)
    ground = Collider(GROUND, None, WORLD)
    names = list(by_name) + ([GROUND] if has_ground else [])
    pairs, seen = [], set()
    for i, entry in enumerate(doc):
        r = Fields(entry, source, f"contacts[{i}]", {"a", "b"})
        a, b = r.string("a"), r.string("b")
        for key, nm in (("a", a), ("b", b)):
            if nm not in names:
                hint = " (the scene has no ground)" if nm == GROUND else closest(nm, names)
                r.fail(key, f"unknown body or geom '{nm}'{hint}")
        if a == b:
            r.fail("b", "a geom cannot touch itself" if a in (g.name for g in geoms)
                   else "a body cannot touch itself")
        if a == GROUND:
            a, b = b, a
        one, two = by_name[a], by_name.get(b, ground)
        if one.owner == WORLD and (two is ground or two.owner == WORLD):
            r.fail("b", f"'{a}' and '{b}' are both fixed to the world; neither moves")
        if one.owner == two.owner:
            r.fail("b", f"'{a}' and '{b}' are both on body '{one.owner}': a body's geoms "
                   "cannot touch the body or each other")
        if two is ground:
            pair = ContactPair(a, b) if (one.shape, GROUND) in CONTACT_KINDS else None
        else:
            pair = oriented(one, two)
        if pair is None:
            kinds = f"{one.shape.value}-{getattr(two.shape, 'value', GROUND)}"
            r.fail("b", f"contact {kinds} is not supported; supported: "
                   + ", ".join(k.value for k in CONTACT_KINDS.values()))
        key = frozenset((a, b))
        if key in seen:
            r.fail("b", f"pair {pair.a}-{pair.b} listed twice")
        seen.add(key)
        pairs.append(pair)
    return tuple(pairs)
