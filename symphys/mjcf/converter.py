"""The state of one MJCF conversion (`Converter`: the compiled model, its
data at qpos0, what to drop) and MuJoCo's enums as symphys reads them."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import mujoco

from symphys.errors import SceneError
from symphys.mjcf.shapes import geom_label


class Unsupported(enum.Enum):
    """What a load does with a geom symphys cannot represent."""

    ERROR = "error"     # refuse the file, naming the geom and why
    DROP = "drop"       # leave the geom out, and list it


class Obj(enum.IntEnum):
    BODY = int(mujoco.mjtObj.mjOBJ_BODY)
    JOINT = int(mujoco.mjtObj.mjOBJ_JOINT)
    ACTUATOR = int(mujoco.mjtObj.mjOBJ_ACTUATOR)


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
    dropped: list = field(default_factory=list)

    def name(self, obj: Obj, i: int, prefix: str) -> str:
        return mujoco.mj_id2name(self.m, int(obj), i) or f"{prefix}{i}"

    def refuse(self, item: str, why: str):
        raise SceneError(why, source=self.source, item=item)

    def unsupported_geom(self, g: int, why: str):
        """Drop geom g (listing it) or refuse the file."""
        if not self.drop:
            self.refuse(geom_label(self.m, g), why + "; load with on_unsupported='drop' "
                        "(symphys convert --drop-unsupported) to leave it out")
        self.dropped.append(f"{geom_label(self.m, g)}: {why}")

    def unsupported_pair(self, why: str):
        """Drop a contact pair (listing it) or refuse the file."""
        if not self.drop:
            self.refuse("contact pair", why + "; load with on_unsupported='drop' "
                        "(symphys convert --drop-unsupported) to leave it out")
        self.dropped.append(f"contact pair {why}")


def dof_count(kind) -> int:
    return {MjJoint.FREE: 6, MjJoint.BALL: 3}.get(MjJoint(int(kind)), 1)
