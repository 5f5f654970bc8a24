"""Learning through the simulator: controllers (`nn`, `vision`),
optimisers, gradient estimators, imitation and closed-loop losses."""
