"""The state of one MJCF conversion (`Converter`: the compiled model, its
data at qpos0, what to drop) and MuJoCo's enums as symphys reads them."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import mujoco

from symphys.errors import SceneError
from symphys.mjcf.shapes import geom_label


class Unsupported(enum.Enum):
    """What a load does with an element symphys cannot represent but can
    leave out (a geom, heavy armature, a passive tendon)."""

    ERROR = "error"     # refuse the file, naming the element and why
    DROP = "drop"       # leave the element out, and list it


class WayOut(enum.Enum):
    """The option that leaves a kind of element out instead of refusing the
    file: its `convert_model` keyword (the value) and `symphys convert` flag."""

    GEOMS = "on_unsupported"
    ARMATURE = "heavy_armature"
    TENDONS = "passive_tendons"

    @property
    def hint(self) -> str:
        flag = {WayOut.GEOMS: "--drop-unsupported", WayOut.ARMATURE: "--drop-heavy-armature",
                WayOut.TENDONS: "--drop-passive-tendons"}[self]
        return f"{self.value}='drop' (symphys convert {flag})"


@dataclass(frozen=True)
class Refusal:
    """One element the conversion cannot take: `item` names it, `detail` says
    what it has, `reason` why symphys cannot take it (shared by the elements
    refused alike), `way_out` the option that leaves it out (None: none)."""

    item: str
    reason: str
    detail: str = ""
    way_out: WayOut | None = None

    @property
    def what(self) -> str:
        return f"{self.item}: {self.detail}" if self.detail else self.item


def refusal_error(refusals: list, source: str) -> SceneError:
    """One error listing every refusal: alone, on one line; else grouped by
    reason and way out, each said once above the elements it covers."""
    if len(refusals) == 1:
        (r,) = refusals
        why = f"{r.detail}; {r.reason}" if r.detail else r.reason
        out = f"; load with {r.way_out.hint} to leave it out" if r.way_out else ""
        return SceneError(why + out, source=source, item=r.item)
    groups: dict = {}
    for r in refusals:
        groups.setdefault((r.reason, r.way_out), []).append(r.what)
    lines = [f"symphys cannot convert {len(refusals)} elements of this file:"]
    for (reason, way_out), items in groups.items():
        out = (f"; load with {way_out.hint} to leave {'these' if len(items) > 1 else 'it'} out"
               if way_out else "")
        lines.append(f"  {reason}{out}:")
        lines += [f"    - {item}" for item in items]
    return SceneError("\n".join(lines), source=source)


class Obj(enum.IntEnum):
    BODY = int(mujoco.mjtObj.mjOBJ_BODY)
    JOINT = int(mujoco.mjtObj.mjOBJ_JOINT)
    ACTUATOR = int(mujoco.mjtObj.mjOBJ_ACTUATOR)
    TENDON = int(mujoco.mjtObj.mjOBJ_TENDON)
    EQUALITY = int(mujoco.mjtObj.mjOBJ_EQUALITY)


class MjJoint(enum.IntEnum):
    FREE = int(mujoco.mjtJoint.mjJNT_FREE)
    BALL = int(mujoco.mjtJoint.mjJNT_BALL)
    SLIDE = int(mujoco.mjtJoint.mjJNT_SLIDE)
    HINGE = int(mujoco.mjtJoint.mjJNT_HINGE)


@dataclass
class Converter:
    """The conversion's working state (one model)."""

    m: object
    d: object
    source: str
    drop: bool
    cylinders: bool
    drop_armature: bool = False
    drop_tendons: bool = False
    dropped: list = field(default_factory=list)
    refusals: list = field(default_factory=list)

    def name(self, obj: Obj, i: int, prefix: str) -> str:
        return mujoco.mj_id2name(self.m, int(obj), i) or f"{prefix}{i}"

    def refuse(self, item: str, reason: str, detail: str = "",
               way_out: WayOut | None = None) -> None:
        """Note an element the file cannot be converted with; the conversion
        goes on, to name them all in one error (`check`)."""
        self.refusals.append(Refusal(item, reason, detail, way_out))

    def leave_out(self, item: str, reason: str, way_out: WayOut, detail: str = "") -> None:
        """Drop the element (listing it) if `way_out` is chosen, else refuse it."""
        if {WayOut.GEOMS: self.drop, WayOut.ARMATURE: self.drop_armature,
                WayOut.TENDONS: self.drop_tendons}[way_out]:
            self.dropped.append(f"{item}: {detail}; {reason}: left out" if detail
                                else f"{item}: {reason}: left out")
        else:
            self.refuse(item, reason, detail, way_out)

    def check(self) -> None:
        """Raise one SceneError listing every refusal, if any."""
        if self.refusals:
            raise refusal_error(self.refusals, self.source)

    def unsupported_geom(self, g: int, why: str):
        """Drop geom g (listing it) or refuse it."""
        self.leave_out(geom_label(self.m, g), why, WayOut.GEOMS)

    def unsupported_pair(self, pair: str, why: str):
        """Drop a contact pair (listing it) or refuse it."""
        self.leave_out(f"contact pair {pair}", why, WayOut.GEOMS)


def dof_count(kind) -> int:
    return {MjJoint.FREE: 6, MjJoint.BALL: 3}.get(MjJoint(int(kind)), 1)
