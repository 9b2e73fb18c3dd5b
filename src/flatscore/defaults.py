"""Every default flatscore has, in one place: how episodes are run (both forms of `flatscore
run`, study files, `demo`), how reflective repair runs, and how the analysis, `gate` and the
report compute their numbers. Everything else refers here, so a default changes once.

Run defaults follow τ²-bench where τ² has one: an episode stops at its 10th counted failed
tool call (`MAX_ERRORS`, τ²'s `max_errors`, so the analysis's default budget is K = 9),
counting agent and user errors (`COUNTED`), and trial `t` uses seed `SEED + t`. Documented
in docs/studies.md ("Run defaults") and docs/analysis.md.

A floor module: it imports nothing of flatscore's, so any layer may use it.
"""

from __future__ import annotations

from typing import Final, Literal

CountMode = Literal["all", "agent"]
"""Which failed tool calls count against an error budget: agent and user (`all`, like τ²)
or the agent's only. The one spelling of the choice (run budgets, the analysis's K, episodes)."""

# --- running episodes -------------------------------------------------------------------

MAX_ERRORS: Final = 10
"""Counted failed tool calls that end an episode (`too_many_errors`): τ²'s default."""

COUNTED: Final[CountMode] = "all"
"""Which failed calls count against the budget: agent and user (`all`, like τ²) or `agent`."""

MAX_STEPS: Final = 40
"""Messages after the greeting before an episode ends `max_steps`."""

SEED: Final = 300
"""Base seed (τ²'s): trial `t` uses `SEED + t` for every task and arm."""

TRIALS: Final = 1
SPLIT: Final[Literal["train", "test", "all"]] = "test"

CONCURRENCY: Final = 2
"""Episodes in flight with the local executor (one torch thread each on CPU)."""

STUDY_NAME: Final = "study"
"""The study label of a study file without `name`."""

QUICK_STUDY_NAME: Final = "adhoc"
"""The study label of a quick-form run without `--study`."""

USER_PATIENCE: Final = 3
"""Scripted user: turns without progress before it gives up."""

# --- model endpoints and decoding (study files, `BackendSpec`, `OpenAIConfig`) ------------

# An OpenAI-compatible endpoint: the seconds one request may take, the retries of a request
# that failed for a reason a retry can fix (timeouts, 429, 5xx), the requests in flight (and
# pooled connections). τ²-bench runs: litellm's retries and timeout per request (the study's
# `tau2.max_retries`, `tau2.request_timeout_s`). Decoding: temperature (0: greedy), top-p and
# the tokens one model turn may generate (study files; `Sampling`).
ENDPOINT_TIMEOUT_S: Final[float] = 120.0
ENDPOINT_RETRIES: Final[int] = 4
ENDPOINT_CONCURRENCY: Final[int] = 8
TAU2_RETRIES: Final[int] = 3
TAU2_TIMEOUT_S: Final[float] = 600.0
TEMPERATURE: Final[float] = 0.0
TOP_P: Final[float] = 1.0
MAX_TOKENS: Final[int] = 256
AGENT_MAX_TOKENS: Final[int] = 192
"""The tokens one turn of the registry's model-backed agent may generate (`--agent model` /
`embedded`, `flatscore.agents.model`; `flatscore eval-embedded`): its own default, below a
study's `MAX_TOKENS`."""

MAX_BATCH: Final = 16
"""In-process models: sequences one engine decodes together per arm, a full pass of the
batch engine's 16 padded rows (`flatscore.models.batching.MIN_ROWS`)."""

KV_MEMORY_MB: Final = 512.0
"""In-process models: KV memory per arm, the sequences in flight and the prefix cache
(`flatscore.models.local.LocalBackend`'s `kv_memory_mb`; docs/benchmarks.md)."""

TAU2_SERVE_START_TIMEOUT_S: Final = 900.0
"""τ²-bench runs: seconds a started `flatscore serve` may take to answer `/health`."""

# --- reflective repair --------------------------------------------------------------------

REPAIR_TRIGGER_CHANNELS: Final = ("unknown_tool",)
"""Channels whose failures trigger a repair instruction by default (the study's leak); the
channels repair can trigger on at all are `flatscore.study.agent.REPAIR_CHANNELS`."""

REPAIR_ATTEMPTS: Final = 3
"""Repair instructions per failure chain."""

# --- analysis (`analyze`, `report`, `gate`, `repair-effect`, study files) ------------------

COUNT: Final[CountMode] = "all"
"""Which failed calls count against K in S(K): all (like τ²) or the agent's only."""

DEFAULT_K: Final = MAX_ERRORS - 1
"""The analysis's default error budget K when the episodes recorded none: τ²'s
`max_errors` = 10 gives K = 9 (S(K) is exact for K < max_errors)."""

TOST_MARGIN: Final = 0.075
"""TOST equivalence margin, a fraction (7.5 points where the CLI and study files speak points)."""

BOOTSTRAP: Final = 5000
"""Bootstrap resamples."""

BOOTSTRAP_MIN_TASKS: Final = 30
"""Below this many paired tasks a percentile task bootstrap does not keep its coverage (it
collapses to [0, 0] without discordant tasks); such intervals are left out (null, with a
note) and success differences use the paired interval (paired_score), which holds at every
size."""

ANALYSIS_SEED: Final = 0
"""Seed of the analysis' resampling and simulations (reports are reproducible)."""

Correction = Literal["holm", "bh"]
"""A multiple-testing correction: Holm, or Benjamini–Hochberg. The one spelling of the choice."""

CORRECTION: Final[Correction] = "holm"
"""Multiple-testing correction across the study's comparisons."""

CONFIDENCE: Final = 0.95
ALPHA: Final = 0.05

RISK_THRESHOLD: Final = 0.02
"""Risk screen: a reference channel rate at or above this counts as an established channel."""

TIGHT_K: Final = 2
"""`gate` and `power`: the tight error budget at which a hidden gap is looked for."""

GATE_SIMULATIONS: Final = 300
"""`gate`: simulated studies per power estimate."""

# --- bounds (where a typo would otherwise cost hours or all memory) -----------------------

MAX_BUDGET: Final = 1000
"""The largest error budget K (and `max_errors`) accepted (`--budgets 0-1000000000` is a
typo): τ² budgets are ~10, and an episode of a few hundred steps cannot fail more calls."""

MIN_BOOTSTRAP: Final = 100
MAX_BOOTSTRAP: Final = 100_000
"""Bootstrap resamples: fewer than 100 cannot place a 95% percentile interval; more than
100,000 adds no visible digit and only costs time and memory."""

# --- sequential verdicts (`analyze --sequential`, `gate --sequential`) --------------------

SEQUENTIAL_LOOK_EVERY: Final = 6
"""Paired tasks between two looks of a sequential comparison (and a look at the maximum)."""

SEQUENTIAL_FIRST_LOOK: Final = 0.25
"""The first look comes at the first multiple of the look interval at or above this share
of the maximum (30 of 114 tasks): before it a boundary is too strict to stop on anything but
a gross effect, and looks spent there raise every later boundary (chosen by simulation:
docs/analysis.md, "Sequential verdicts")."""

SEQUENTIAL_RATIO_MARGIN: Final = 1.25
"""The all-channel failed-call ratio below which failures count as bounded (chosen by
simulation: docs/analysis.md, "Sequential verdicts")."""

SEQUENTIAL_DIFFERENCE_MARGIN: Final = 0.02
"""… or the extra failed calls per agent call (2 per 100) below which they count as bounded:
the scale a study reaches when its reference fails rarely (chosen by simulation on the
committed studies' profiles: docs/analysis.md, "Failures cluster in tasks")."""

SEQUENTIAL_GAMMA_DAMAGE: Final = -2.0
"""Hwang–Shih–DeCani parameter of the spending function of the sequential damage and
amplification tests (chosen by simulation)."""

SEQUENTIAL_GAMMA_EQUIVALENCE: Final = -4.5
"""… and of the equivalence and bound tests (chosen by simulation)."""

JSON_DIGITS: Final = 10
"""Significant digits of every float in analysis.json and the other JSON outputs
(`analysis.outputs.rounded_json`: why)."""
