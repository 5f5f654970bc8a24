"""The step repeated: the time loop with the controller in it (`timeloop`),
loops with their own reverse pass (`adjoint`), symbolic rollouts
(`rollout`)."""
