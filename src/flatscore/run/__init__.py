"""Running episodes: the study schema (`study`, a leaf checked against the registries), the
driver that plans and runs a study (`driver`), the episode loop and the agent's and user's
views (`episode_loop`, `views`), the executors (`executors`: local asyncio or Ray), the
quick form of `flatscore run` (`quick`), τ²-bench run live (`tau2`), the demo and the
logit-margin measurement (`margins`).

Nothing is imported here, so reading a study file does not load the episode machinery."""
