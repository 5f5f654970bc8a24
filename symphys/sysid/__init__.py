"""System identification: scene parameters fitted to recorded trajectories.

    from symphys import sysid
    result = sysid.fit(scene, recordings, fit=["arm.mass", "hinge.dry_friction"])

`data` holds what is fitted and compared, `fitting` the residuals and the
optimisers, `starts` fits from several starting points (in this process or
on a Ray cluster), `recordings` the trajectory files.
"""

from symphys.sysid.data import Data, Segment, Variable, scene_variables, segment_data
from symphys.sysid.fitting import FitResult, Method, fit, fit_data, predict, residual_function
from symphys.sysid.starts import MultiStartResult, fit_from_starts

__all__ = ["Data", "FitResult", "Method", "MultiStartResult", "Segment", "Variable", "fit",
           "fit_data", "fit_from_starts", "predict", "residual_function", "scene_variables",
           "segment_data"]
