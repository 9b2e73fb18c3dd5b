"""Running episodes, in layers: loading a study file into the schema (`flatscore.study`) and
checking it against the registries (`study`, `checks`), the driver that plans and runs a
study (`driver`), the job data (`jobs`), the episode sources that plan and run jobs
(`episode_source`, `sources`; the built-in domains in `builtin`, τ²-bench run live in
`tau2`), the executors that call them (`executors`: local asyncio or Ray), the episode loop
and the agent's and user's views (`episode_loop`, `views`), the quick form of `flatscore
run` (`quick`), the demo and the logit-margin measurement (`margins`).

Nothing is imported here, so reading a study file does not load the episode machinery."""
