"""MuJoCo actuators on a joint as symphys torque motors (`convert_motors`)."""

from __future__ import annotations

import mujoco

from symphys.mjcf.converter import Converter, MjJoint, Obj
from symphys.scene.elements import UNBOUNDED_TORQUE, MotorMode

# A motor whose file bounds neither its command nor its force gets the
# torque bound UNBOUNDED_TORQUE (N m or N): no limit in practice, finite for
# the solver; with stiffness or damping it then acts implicitly.


def convert_motors(c: Converter) -> list[dict]:
    """Actuators on a joint as torque motors. MuJoCo's actuator force is
    gainprm[0] ctrl + biasprm[1] length + biasprm[2] velocity (length =
    gear q, with q absolute), the joint's torque gear times it: so gain =
    gear gainprm[0], stiffness = -gear^2 biasprm[1], damping = -gear^2
    biasprm[2] (a <motor>: 0, 0; a <position>: kp, kv; a <velocity>: 0,
    kv); the command range is ctrlrange, the torque bound gear forcerange."""
    m = c.m
    docs = []
    for u in range(m.nu):
        name = c.name(Obj.ACTUATOR, u, "actuator")
        label = f"actuator {name!r}"
        if int(m.actuator_trntype[u]) != int(mujoco.mjtTrn.mjTRN_JOINT):
            c.refuse(label, "only actuators on a joint are supported (not on a tendon, "
                     "site or body)")
            continue
        if int(m.actuator_dyntype[u]) != int(mujoco.mjtDyn.mjDYN_NONE):
            c.refuse(label, "actuator dynamics (dyntype) are not supported")
        if int(m.actuator_gaintype[u]) != int(mujoco.mjtGain.mjGAIN_FIXED) or int(
                m.actuator_biastype[u]) not in (int(mujoco.mjtBias.mjBIAS_NONE),
                                                int(mujoco.mjtBias.mjBIAS_AFFINE)):
            c.refuse(label, "only motor, position and velocity actuators (a fixed gain and "
                     "an affine bias) are supported")
        j = int(m.actuator_trnid[u][0])
        if MjJoint(int(m.jnt_type[j])) not in (MjJoint.HINGE, MjJoint.SLIDE):
            c.refuse(label, "drives a free or ball joint; symphys motors drive hinges "
                     "and sliders")
        gear = float(m.actuator_gear[u][0])
        bias = [float(x) for x in m.actuator_biasprm[u][:3]]
        if int(m.actuator_biastype[u]) == int(mujoco.mjtBias.mjBIAS_NONE):
            bias = [0.0, 0.0, 0.0]
        gain, stiffness, damping = (gear * float(m.actuator_gainprm[u][0]),
                                    -gear * gear * bias[1], -gear * gear * bias[2])
        q0 = float(m.qpos0[m.jnt_qposadr[j]])
        if gain < 0 or stiffness < 0 or damping < 0:
            c.refuse(label, "a motor's gain, stiffness and damping (from gear, gainprm and "
                     "biasprm) must not be negative in symphys",
                     f"gain {gain:g}, stiffness {stiffness:g} and damping {damping:g}")
        if bias[0] or (stiffness and q0):
            c.refuse(label, "a constant bias (biasprm[0], or kp times a joint 'ref') is not "
                     "supported")
        doc = {"name": name, "joint": c.name(Obj.JOINT, j, "joint"),
               "mode": MotorMode.TORQUE.value, "gain": gain}
        if stiffness or damping:
            doc.update(stiffness=stiffness, damping=damping)
        bound = UNBOUNDED_TORQUE
        if m.actuator_ctrllimited[u]:
            lo, hi = (float(x) for x in m.actuator_ctrlrange[u])
            doc["command_range"] = [lo, hi]
            if not (stiffness or damping):
                bound = gain * max(abs(lo), abs(hi))
        if m.actuator_forcelimited[u]:
            lo, hi = (float(x) for x in m.actuator_forcerange[u])
            if lo != -hi:
                c.refuse(label, "symphys bounds a motor's torque by +-max_torque: forcerange "
                         "must be symmetric about 0", f"attribute 'forcerange' [{lo:g}, {hi:g}]")
            bound = min(bound, abs(gear) * hi)
        doc["max_torque"] = bound
        docs.append(doc)
    return docs
