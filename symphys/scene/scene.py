"""The `Scene`: a whole validated scene as one frozen dataclass, with the
names and defaults of its differentiable parameters (`Scene.parameters`).
"""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from symphys.errors import SceneError
from symphys.scene.elements import (FEEDBACK_FIELDS, MOTOR_FIELDS, Body, Camera, ContactPair, Geom,
                                    Ground, Joint, JointType, Motor, Sensor, SensorKind, Shape,
                                    SolverOptions)


def size_fields(shape: Shape) -> tuple[str, ...]:
    """The size parameters of a body or geom of `shape`, in parameter order."""
    return (("radius",) if shape in (Shape.SPHERE, Shape.CAPSULE) else ()) + (
        ("size",) if shape is Shape.BOX else ()) + (("length",) if shape is Shape.CAPSULE else ())


@dataclass(frozen=True)
class Scene:
    """A validated scene. `source` names the file or builder it came from."""

    name: str
    dt: float
    gravity: tuple[float, float, float]
    solver: SolverOptions
    ground: Ground | None
    bodies: tuple[Body, ...]
    contacts: tuple[ContactPair, ...]
    joints: tuple[Joint, ...] = ()
    motors: tuple[Motor, ...] = ()
    sensors: tuple[Sensor, ...] = ()
    source: str = "<builder>"
    raw: str = field(default="", repr=False, compare=False)
    # Cameras only render; like body colours they shape no physics graph
    # (`structure_key` leaves them out).
    cameras: tuple[Camera, ...] = ()
    # Further collision shapes on bodies or on the world (`Geom`).
    geoms: tuple[Geom, ...] = ()

    # -- lookups ----------------------------------------------------------
    @property
    def body_names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.bodies)

    def body_index(self, name: str) -> int:
        return self.body_names.index(name)

    @property
    def geom_names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.geoms)

    def collider(self, name: str) -> Body | Geom:
        """The body or geom a contact pair names (not "ground")."""
        for item in self.bodies + self.geoms:
            if item.name == name:
                return item
        raise KeyError(name)

    def appearance_key(self, camera: Camera) -> tuple:
        """What a render graph holds besides the structure: the camera and
        how every surface looks (hashable)."""
        ground = None if self.ground is None else (self.ground.color, self.ground.texture)
        key = (camera, tuple((b.color, b.texture) for b in self.bodies), ground)
        # Geoms' colours (keys of scenes without geoms are left as they were).
        return key + (tuple(g.color for g in self.geoms),) if self.geoms else key

    def camera(self, name: str) -> Camera:
        """The camera called `name`; SceneError naming the closest one."""
        for cam in self.cameras:
            if cam.name == name:
                return cam
        import difflib
        names = [c.name for c in self.cameras]
        match = difflib.get_close_matches(str(name), names, n=1, cutoff=0.5)
        hint = f" (did you mean '{match[0]}'?)" if match else ""
        raise SceneError(f"unknown camera {name!r}{hint}; the scene's cameras: {names}",
                         source=self.source, field="cameras")

    def with_camera(self, camera: Camera) -> "Scene":
        """This scene with its camera of the same name replaced by `camera`
        (another resolution, say); camera sensors reading it are resized to
        the new image (W H 3 columns)."""
        self.camera(camera.name)                       # SceneError if there is none
        w, h = camera.resolution
        sensors = tuple(replace(x, size=w * h * 3)
                        if x.kind is SensorKind.CAMERA and x.source == camera.name else x
                        for x in self.sensors)
        cameras = tuple(camera if c.name == camera.name else c for c in self.cameras)
        return replace(self, cameras=cameras, sensors=sensors)

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def motor_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.motors)

    @property
    def n_observations(self) -> int:
        return sum(s.width for s in self.sensors)

    @property
    def n_targets(self) -> int:
        """Task inputs per world, read by target sensors in scene order."""
        return sum(s.task_width for s in self.sensors)

    def parameters(self) -> dict[str, np.ndarray]:
        """{name: default value as a float64 array} of every differentiable
        parameter, in a fixed order: what `params=`, `wrt=` and `fit=` name."""
        values: dict[str, np.ndarray] = {}
        for b in self.bodies:
            values[f"{b.name}.mass"] = b.mass
            for key in size_fields(b.shape):
                values[f"{b.name}.{key}"] = getattr(b, key)
            if b.inertia is not None:
                values[f"{b.name}.inertia"] = b.inertia
            values[f"{b.name}.position"] = b.position
            values[f"{b.name}.velocity"] = b.velocity
            values[f"{b.name}.angular_velocity"] = b.angular_velocity
            values[f"{b.name}.quaternion"] = b.quaternion
            values[f"{b.name}.friction"] = b.friction
            values[f"{b.name}.restitution"] = b.restitution
            if self.has_rolling_friction:
                values[f"{b.name}.rolling_friction"] = b.rolling_friction
        for g in self.geoms:
            for key in size_fields(g.shape) + ("position", "quaternion", "friction",
                                               "restitution"):
                values[f"{g.name}.{key}"] = getattr(g, key)
            if self.has_rolling_friction:
                values[f"{g.name}.rolling_friction"] = g.rolling_friction
        if self.ground is not None:
            values["ground.height"] = self.ground.height
            values["ground.friction"] = self.ground.friction
            values["ground.restitution"] = self.ground.restitution
            if self.has_rolling_friction:
                values["ground.rolling_friction"] = self.ground.rolling_friction
        for j in self.joints:
            values[f"{j.name}.anchor"] = j.anchor
        for j in self.drag_joints:
            values[f"{j.name}.viscous_damping"] = j.viscous_damping
            values[f"{j.name}.dry_friction"] = j.dry_friction
            values[f"{j.name}.armature"] = j.armature
            if self.has_joint_springs:
                values[f"{j.name}.spring_stiffness"] = j.spring_stiffness
                values[f"{j.name}.spring_reference"] = j.spring_reference
        for m in self.motors:
            for key in MOTOR_FIELDS + (FEEDBACK_FIELDS if m.feedback else ()):
                values[f"{m.name}.{key}"] = getattr(m, key)
        values["world.gravity"] = self.gravity
        if self.solver.constraint_frequency is not None:
            values["solver.constraint_frequency"] = self.solver.constraint_frequency
            values["solver.constraint_damping"] = self.solver.constraint_damping
        if self.solver.penalty:
            values["solver.contact_stiffness"] = self.solver.contact_stiffness
            values["solver.contact_damping"] = self.solver.contact_damping
        if self.solver.velocity_damping > 0:
            values["solver.velocity_damping"] = self.solver.velocity_damping
        return {k: np.asarray(v, dtype=np.float64) for k, v in values.items()}

    @property
    def drag_joints(self) -> list:
        """The joints with bearing-loss parameters: every hinge and slider when
        any joint of the scene has losses, else none."""
        if not self.has_joint_drag:
            return []
        return [j for j in self.joints if j.type in (JointType.HINGE, JointType.SLIDER)]

    @property
    def sees_images(self) -> bool:
        """Whether a camera sensor puts a rendered image into the observations."""
        return any(s.kind is SensorKind.CAMERA for s in self.sensors)

    @property
    def has_rolling_friction(self) -> bool:
        """Whether contacts carry rolling-resistance rows (any value > 0)."""
        values = [b.rolling_friction for b in self.bodies + self.geoms]
        if self.ground is not None:
            values.append(self.ground.rolling_friction)
        return any(v > 0 for v in values)

    @property
    def has_joint_springs(self) -> bool:
        """Whether any joint has a spring; then every hinge and slider has
        the parameters `<joint>.spring_stiffness` and `<joint>.spring_reference`."""
        return any(j.spring_stiffness > 0 for j in self.joints)

    @property
    def has_joint_drag(self) -> bool:
        """Whether hinges and sliders carry bearing losses or armature (any
        joint > 0); then every hinge and slider has the parameters
        `<joint>.viscous_damping`, `<joint>.dry_friction` and `<joint>.armature`."""
        return any(j.has_drag for j in self.joints)

    @property
    def implicit_motors(self) -> dict[int, int]:
        """{joint index: motor index}: the torque motors whose stiffness and
        damping act implicitly, in their joint's drag row (`drives.drag_rows`):
        those with feedback, unbounded (`Motor.unbounded`, decided by the
        scene's max_torque, not a parameter's value) on a hinge or slider
        (a joint has at most one motor)."""
        out: dict[int, int] = {}
        for i, m in enumerate(self.motors):
            j = self.joint_names.index(m.joint)
            if (m.feedback and m.unbounded
                    and self.joints[j].type in (JointType.HINGE, JointType.SLIDER)):
                out[j] = i
        return out

    @property
    def drag_row_joints(self) -> list[int]:
        """Indices of the joints with a drag row: the `drag_joints` and the
        joints of `implicit_motors`, in scene order."""
        lossy = {j.name for j in self.drag_joints}
        held = self.implicit_motors
        return [k for k, j in enumerate(self.joints) if j.name in lossy or k in held]

    def structure_key(self) -> str:
        """Hash of everything that shapes the graph (not parameter values)."""
        solver = {k: (v.value if isinstance(v, enum.Enum) else v)
                  for k, v in asdict(self.solver).items()}
        # Frequency and damping are graph inputs; only their presence shapes it.
        solver["constraint_frequency"] = self.solver.constraint_frequency is not None
        solver.pop("constraint_damping")
        solver.pop("contact_stiffness")      # inputs too (penalty models)
        solver.pop("contact_damping")
        solver["velocity_damping"] = self.solver.velocity_damping > 0   # an input when present
        doc = {
            "dt": self.dt,
            "solver": solver,
            "ground": self.ground is not None,
            "rolling": self.has_rolling_friction,
            "bodies": [(b.name, b.shape.value) for b in self.bodies],
            "contacts": [(c.a, c.b) for c in self.contacts],
            # Joint axes and limits are built into the graph as constants;
            # anchors and motor gains are inputs.
            "joints": [(j.name, j.type.value, j.parent, j.child, j.axis, j.limits, j.axis2,
                        j.softness)
                       for j in self.joints],
            "motors": [(m.name, m.joint, m.mode.value, m.command_range, m.axis)
                       for m in self.motors],
            "sensors": [(x.kind.value, x.source, x.frequencies, x.size, x.margin)
                        for x in self.sensors],
        }
        if self.has_joint_drag:
            # Only its presence shapes the graph (the values are inputs); the
            # key is left as it was for scenes without it.
            doc["joint_drag"] = True
        # Explicit inertias and a torque motor's feedback gains are inputs
        # when present, so only which bodies and motors have them shapes it
        # (keys of scenes without them are left as they were).
        explicit = [b.name for b in self.bodies if b.inertia is not None]
        if explicit:
            doc["explicit_inertia"] = explicit
        if self.has_joint_springs:
            doc["joint_springs"] = True
        if self.geoms:
            doc["geoms"] = [(g.name, g.body, g.shape.value) for g in self.geoms]
        feedback = [m.name for m in self.motors if m.feedback]
        if feedback:
            doc["motor_feedback"] = feedback
        implicit = sorted(self.implicit_motors.values())
        if implicit:
            doc["implicit_motors"] = [self.motors[i].name for i in implicit]
        seen = sorted({x.source for x in self.sensors if x.kind is SensorKind.CAMERA})
        if seen:
            # A camera sensor puts the image into the graph: the cameras it
            # reads and every surface's look shape it (keys of scenes
            # without one are left as they were).
            doc["camera_sensors"] = repr([self.appearance_key(self.camera(n)) for n in seen])
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]

    def values_key(self, given=()) -> str:
        """Hash of the parameter values a graph holds as constants: every
        parameter's default except those named in `given` (graph inputs).
        Entry points that build the scene's defaults into the graph key
        their functions by it as well as by `structure_key`, so a scene
        that differs only in a value (a motor gain, a mass) gets its own."""
        given = set(given)
        digest = hashlib.sha256()
        for name, value in sorted(self.parameters().items()):
            if name not in given:
                digest.update(name.encode())
                digest.update(np.ascontiguousarray(value, dtype=np.float64).tobytes())
        return digest.hexdigest()[:16]
