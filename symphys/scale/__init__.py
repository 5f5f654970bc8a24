"""Past one process: populations evaluated on a Ray cluster
(`RayCluster`, `Recipe`) and batches of worlds sharded over JAX devices
(`sharding`). The default executor, `InProcess`, evaluates here."""

from symphys.scale.executors import (RAY_ADDRESS_VARIABLE, ClusterError, InProcess, RayCluster,
                                     Where, as_executor, bind)
from symphys.scale.recipe import Recipe, evaluate_share

__all__ = ["RAY_ADDRESS_VARIABLE", "ClusterError", "InProcess", "RayCluster", "Recipe", "Where",
           "as_executor", "bind", "evaluate_share"]
