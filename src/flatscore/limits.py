"""The largest values flatscore accepts where a typo would otherwise cost hours or all memory
(`--budgets 0-1000000000`, `--bootstrap 5000000000`). Kept outside `flatscore.analysis` so
the CLI can state them in its flags without importing the analysis stack."""

MAX_BUDGET = 1000
"""The largest error budget K (and `max_errors`): τ² budgets are ~10, and an episode of a few
hundred steps cannot fail more calls than that."""

MIN_BOOTSTRAP = 100
MAX_BOOTSTRAP = 100_000
"""Bootstrap resamples: fewer than 100 cannot place a 95% percentile interval; more than
100,000 adds no visible digit and only costs time and memory."""
