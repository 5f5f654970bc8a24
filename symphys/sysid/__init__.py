"""System identification: scene parameters fitted to recorded trajectories.

    from symphys import sysid
    result = sysid.fit(scene, recordings, fit=["arm.mass", "hinge.dry_friction"])

`data` holds what is fitted and compared, `fitting` the residuals and the
optimisers, `recordings` the trajectory files.
"""

from symphys.sysid.data import Data, Segment, Variable, scene_variables, segment_data
from symphys.sysid.fitting import FitResult, Method, fit, fit_data, predict, residual_function

__all__ = ["Data", "FitResult", "Method", "Segment", "Variable", "fit", "fit_data", "predict",
           "residual_function", "scene_variables", "segment_data"]
