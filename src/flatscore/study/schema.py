"""The study file as data: one YAML document that says what to run and how to analyse it.

A study is models × precision arms × domains (× repair on/off), run with paired seeds: every
arm of a model sees the same tasks, trials and user behaviour, so arms are compared task by
task. These models check what the file alone decides (types, ranges, which fields go
together); what needs the registries (backend kinds, agents, users, executors, domains,
precision formats) is checked where the study is loaded (`flatscore.run.study.load_study`,
through `flatscore.run.checks`), which turns any mistake into one `InputError` naming the
file and the field (`models.0.arms.int4.url`). The reference is `docs/studies.md`.

How a model is reached, per model (`kind`) and per arm:

- `embedded` / `local`: in-process torch (`flatscore.models.local.LocalBackend`); each arm
  names an in-process precision format (`quant`, default: the arm's name) applied to the
  loaded weights (`path`: a `.gguf` file or a Hugging Face model folder; `embedded`: the
  bundled model).
- `gguf`: a GGUF file run in-process by llama.cpp (`flatscore.models.gguf`, the optional
  `gguf` extra); each arm is the reference file (`path`; `quant: ref`), a llama.cpp
  quantization type made from it (`quant: Q8_0`, default: the arm's name), or its own
  GGUF (`file`).
- `openai`: an OpenAI-compatible endpoint per arm (`url`, `served_model`, `api_key_env`):
  vLLM / SGLang / llama.cpp serving BF16, FP8, AWQ checkpoints.
- `agent`: a registered agent without a model (`oracle`, `noop`, ...); each arm may pass it
  options. Smoke tests and pipelines checks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from flatscore import defaults
from flatscore.analysis.settings import POINTS, AnalysisSettings, Price
from flatscore.defaults import MAX_BUDGET, CountMode
from flatscore.strict import StrictModel
from flatscore.study.agent import InjectSpec, RepairConfig
from flatscore.study.backend import BackendSpec, Endpoint, SamplingSpec
from flatscore.study.server import ServerSpec, arm_servers, merged
from flatscore.study.tau2 import Tau2Spec

AGENT_KIND = "agent"
"""The model kind without a backend: a registered agent (`AGENTS`); every other kind is a
registered backend (`flatscore.models.shared.BACKENDS`)."""
DEFAULT_STUDY_NAME = defaults.STUDY_NAME


class ArmSpec(StrictModel):
    """One precision arm of a model. Which fields apply depends on the model's `kind`:
    `quant` (embedded/local), `url` + `served_model` (+ `api_key_env`) (openai), `options`
    (agent). `checkpoint` is free text recorded for the reader (e.g. the HF repo served)."""

    quant: str | None = None
    url: str | None = None
    served_model: str | None = None
    api_key_env: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    file: str | None = Field(None, description="gguf: this arm's own GGUF file")
    checkpoint: str | None = None
    price: Price | None = Field(
        None, description="per 1M prompt/completion tokens and/or per machine-hour (cost)"
    )
    control_of: str | None = Field(
        None,
        description="negative control: a replicate of this other arm (its weights, endpoint "
        "or options) run with another seed base, analysed as an arm and labelled a control",
    )
    seed_base: int | None = Field(
        None, description="control arms: the seed of trial 0 (default: the study's + 10,000)"
    )
    inject: InjectSpec | None = Field(
        None,
        description="planted damage: another arm of this model (`base`) with its agent's tool "
        "calls perturbed at known rates (docs/arms.md); takes nothing else",
    )
    server: ServerSpec | None = Field(
        None,
        description="openai: a server flatscore starts for this arm instead of a `url` "
        "(llama-cpp: `model`, a GGUF file; vllm: `checkpoint`); docs/backends.md",
    )


CONTROL_SEED_OFFSET = 10_000
"""A control arm's default seed base: the study's seed + 10,000 (trial seeds never meet)."""


def _takes_nothing_of_its_own(
    arm_name: str, arm: ArmSpec, fields: tuple[str, ...], why: str
) -> None:
    """An arm played by another arm (an inject arm, a control) sets none of `fields` and no
    options: the error says `why` and what to remove."""
    given = [f for f in fields if getattr(arm, f)]
    if given or arm.options:
        raise ValueError(f"arm {arm_name!r}: {why}; remove {', '.join(given) or 'options'}")


class ModelSpec(Endpoint):
    """A model and its arms. `name` labels the model in every episode (the analysis groups
    cells by it), so keep it the same across arms. The endpoint settings (`Endpoint`:
    `api_key_env`, `timeout_s`, `max_retries`, `endpoint_concurrency`) apply to kind
    `openai`."""

    name: str = Field(min_length=1)
    kind: str = Field("embedded", description="a registered backend, or 'agent'")
    path: str | None = None
    adapter: str | None = Field(
        None,
        description="embedded/local: a LoRA adapter directory (peft, e.g. `flatscore "
        "train-embedded`'s `adapter/`) merged into the weights before each arm is applied; "
        "relative to the study file's folder",
    )
    agent: str | None = None
    arms: dict[str, ArmSpec] = Field(min_length=1)
    sampling: SamplingSpec = Field(default_factory=SamplingSpec)
    server: ServerSpec | None = Field(
        None,
        description="openai: the settings every arm's `server` shares (kind, chat format, "
        "context length, seed, ...); each arm names its own weights",
    )
    cache: bool = Field(True, description="openai: cache responses per arm under the output")
    threads: int = Field(1, ge=1, description="local: torch threads per worker")
    compute: str | None = Field(
        None,
        description="embedded/local: fp32 (default) or bf16 linear layers "
        "(faster on CPUs with AMX / AVX512-BF16; docs/backends.md)",
    )
    kv_memory_mb: float = Field(
        defaults.KV_MEMORY_MB,
        gt=0,
        description="embedded/local/gguf: MiB of KV cache per arm (sequences in flight + "
        "prefix cache; gguf: the streams of the sequences in flight, 4,096 positions each; "
        "arms sharing weights share one engine with their sum); less memory, fewer "
        "sequences per pass",
    )
    engine_per_arm: bool = Field(
        False,
        description="embedded/local: arms that share weights (a control, an inject arm "
        "and their base) each load their own copy and engine, with `threads` each, "
        "instead of sharing one; more memory (one copy of the weights per arm), but the "
        "family gets a thread per arm: with one thread and several arms, one shared "
        "engine is the study's bottleneck",
    )
    private_prefix: bool = Field(
        False,
        description="embedded/local: each sequence copies the shared system turn into its "
        "own KV cache once per turn instead of joining it to its positions in every layer "
        "of every step: the same numbers, faster decode steps (~1.17x at a study's sizes), "
        "the system turn's KV once per sequence (raise kv_memory_mb to keep as many "
        "sequences in flight)",
    )

    @field_validator("adapter")
    @classmethod
    def _adapter_beside_the_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A relative adapter folder is the study file's, like `output` (a study runs the
        same from any working directory)."""
        if value is None:
            return None
        path = Path(value).expanduser()
        base = info.context.get("base_dir") if isinstance(info.context, dict) else None
        if base is not None and not path.is_absolute():
            path = (Path(base) / path).resolve()
        return str(path)

    @field_validator("arms", mode="before")
    @classmethod
    def _arm_list(cls, value: Any) -> Any:
        """`arms: [ref, int8]` is shorthand for `arms: {ref: {}, int8: {}}`."""
        if isinstance(value, list):
            if not all(isinstance(a, str) for a in value):
                raise ValueError("a list of arms must hold arm names only")
            if len(set(value)) != len(value):
                raise ValueError("arm names must be unique")
            return {a: {} for a in value}
        if isinstance(value, dict):
            return {k: {} if v is None else v for k, v in value.items()}
        return value

    @field_validator("arms")
    @classmethod
    def _arm_names(cls, value: dict[str, ArmSpec]) -> dict[str, ArmSpec]:
        for name in value:
            if not name or "/" in name or name != name.strip():
                raise ValueError(f"arm name {name!r}: no slashes or surrounding spaces")
        return value

    @model_validator(mode="after")
    def _reachable(self) -> ModelSpec:
        if self.kind == AGENT_KIND:
            if not self.agent:
                raise ValueError(f"kind {AGENT_KIND!r} needs 'agent': a registered agent name")
        elif self.agent is not None:
            raise ValueError(f"'agent' applies to kind {AGENT_KIND!r} only, not {self.kind!r}")
        for arm_name, arm in self.arms.items():
            if arm.inject is not None:
                base = self.arms.get(arm.inject.base)
                if base is None or base.inject is not None:
                    raise ValueError(
                        f"arm {arm_name!r}: inject.base must name another arm of this model "
                        f"that is not itself injected (arms: {', '.join(self.arms)})"
                    )
                _takes_nothing_of_its_own(
                    arm_name,
                    arm,
                    ("quant", "url", "served_model", "api_key_env", "file", "server"),
                    f"an inject arm takes everything from its base arm {arm.inject.base!r}",
                )
                continue
            if self.kind != AGENT_KIND and arm.options:
                raise ValueError(f"arm {arm_name!r}: options apply to kind {AGENT_KIND} only")
            if arm.server is not None and arm.url is not None:
                raise ValueError(f"arm {arm_name!r}: give either url or server, not both")
            if arm.file is not None and arm.quant is not None:
                raise ValueError(
                    f"arm {arm_name!r}: give either file (a GGUF as it is) or quant (made "
                    "from the model's path), not both"
                )
        for arm_name, arm in self.arms.items():
            if arm.seed_base is not None and arm.control_of is None:
                raise ValueError(f"arm {arm_name!r}: seed_base applies to control arms only")
            if arm.control_of is None:
                continue
            target = self.arms.get(arm.control_of)
            if target is None or arm.control_of == arm_name or target.control_of is not None:
                raise ValueError(
                    f"arm {arm_name!r}: control_of must name another, non-control arm of "
                    f"this model (got {arm.control_of!r})"
                )
            _takes_nothing_of_its_own(
                arm_name,
                arm,
                ("quant", "url", "served_model", "checkpoint", "file", "server"),
                f"a control replicates {arm.control_of!r} as it is",
            )
        arm_servers(self.server, {name: arm.server for name, arm in self.arms.items()})
        return self

    def server_of(self, arm: str) -> ServerSpec | None:
        """The server flatscore starts for `arm` (a control's or inject arm's: its base's),
        the model's shared settings with the arm's own over them; None: not a server arm."""
        own = self.arms[self.played_by(arm)].server
        server = merged(self.server, own) if own is not None else None
        return server.checked() if server is not None else None

    def played_by(self, arm: str) -> str:
        """The arm whose weights, endpoint or options play `arm`: the arm a control
        replicates, an inject arm's base, else itself."""
        spec = self.arms[arm]
        if spec.control_of is not None:
            return spec.control_of
        return spec.inject.base if spec.inject is not None else arm


class UserSpec(StrictModel):
    """The user simulator: `scripted` (deterministic per seed, no model) or `llm` (a model
    reached like any arm: `backend`)."""

    kind: str = Field("scripted", description="a registered user simulator (`USERS`)")
    patience: int = Field(
        defaults.USER_PATIENCE,
        ge=1,
        description="scripted: turns without progress before giving up",
    )
    backend: BackendSpec | None = None
    sampling: SamplingSpec = Field(default_factory=SamplingSpec)


class ErrorBudgetSpec(StrictModel):
    """The budget episodes are *recorded* under. τ² semantics: an episode stops at its
    `max_errors`-th counted error, so S(K) is recomputable from the logs for every
    K < max_errors, and the analysis's default K is max_errors − 1 (τ²'s 10 → K = 9)."""

    max_errors: int | None = Field(defaults.MAX_ERRORS, ge=1, le=MAX_BUDGET)
    counted: CountMode = defaults.COUNTED


class RepairSpec(RepairConfig):
    """Reflective repair as a factor: `off`, `on` (every arm repaired) or `both` (every arm
    twice, `<arm>` and `<arm>+repair`), with the repair settings (`RepairConfig`)."""

    mode: Literal["off", "on", "both"] = "off"

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        """`repair: both` / `repair: true` are shorthand for `repair: {mode: ...}`."""
        if isinstance(value, bool):
            return {"mode": "on" if value else "off"}
        if isinstance(value, str):
            return {"mode": value}
        return value

    def config(self) -> RepairConfig:
        """The settings an arm's agent is wrapped with (no `mode`)."""
        return RepairConfig(channels=self.channels, attempts=self.attempts)

    def levels(self) -> list[bool]:
        return {"off": [False], "on": [True], "both": [False, True]}[self.mode]


class ExecutorSpec(StrictModel):
    """Where episodes run: `local` (asyncio in this process) or `ray` (Ray tasks on a
    cluster: `address` is `ray://host:10001`, `auto`, or empty for a local instance)."""

    kind: str = Field("local", description="a registered executor (`EXECUTORS`)")
    address: str | None = None
    num_cpus: int | None = Field(None, ge=1, description="ray: CPUs of a local instance")
    cpus_per_episode: float = Field(1.0, gt=0)
    runtime_env: dict[str, Any] | None = Field(
        None, description="ray: runtime_env for the workers (e.g. pip: [flatscore])"
    )


class RunSettings(StrictModel):
    """How the episodes run, whoever plans them: the settings a study file and the quick
    form of `flatscore run` (`flatscore.run.quick.QuickRun`) share, declared once."""

    split: Literal["train", "test", "all"] = defaults.SPLIT
    task_ids: list[str] | None = None
    trials: int = Field(defaults.TRIALS, ge=1)
    seed: int = defaults.SEED
    max_steps: int = Field(defaults.MAX_STEPS, ge=1)
    timeout_s: float | None = Field(None, gt=0)
    concurrency: int = Field(defaults.CONCURRENCY, ge=1)


class Study(RunSettings):
    """A whole study; see the module docstring and docs/studies.md."""

    name: str = Field(DEFAULT_STUDY_NAME, min_length=1)
    output: str = "flatscore-out"
    models: list[ModelSpec] = Field(min_length=1)
    domains: list[str] = Field(default_factory=lambda: ["retail", "telecom"], min_length=1)
    tasks_per_domain: int | None = Field(None, ge=1, description="first N tasks of the split")
    order: Literal["domain", "trial"] = Field(
        "domain",
        description="job order: domain-major (domain, trial, task) or trial-major (trial, "
        "domain, task), so that a long study cut short holds every domain",
    )
    stopping: Literal["fixed", "sequential"] = Field(
        "fixed",
        description="fixed: every task of the design; sequential: each comparison stops at "
        "the first planned look that decides it (tasks in a seeded order, all trials of a "
        'task together; docs/studies.md, "Sequential stopping")',
    )
    error_budget: ErrorBudgetSpec = Field(default_factory=ErrorBudgetSpec)
    user: UserSpec = Field(default_factory=UserSpec)
    repair: RepairSpec = Field(default_factory=RepairSpec)
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec)
    analysis: AnalysisSettings = Field(
        default_factory=AnalysisSettings,
        description="the analysis settings (`tost_margin` in points, as on the command line)",
    )
    tau2: Tau2Spec | None = Field(None, description="τ²-bench domains (`tau2:retail`)")
    title: str | None = None
    base_dir: Path = Field(Path("."), exclude=True, description="folder of the study file")

    @field_validator("domains")
    @classmethod
    def _unique_domains(cls, value: list[str]) -> list[str]:
        """`all` (every built-in domain) and unknown names are resolved where the study is
        loaded (`flatscore.run.checks`): the domains are registered, not listed here."""
        if len(set(value)) != len(value):
            raise ValueError("domains must be unique")
        return value

    @field_validator("models")
    @classmethod
    def _unique_models(cls, value: list[ModelSpec]) -> list[ModelSpec]:
        names = [m.name for m in value]
        if len(set(names)) != len(names):
            raise ValueError("model names must be unique")
        return value

    @property
    def output_dir(self) -> Path:
        """The output folder; a relative `output` is relative to the study file's folder."""
        out = Path(self.output).expanduser()
        return out if out.is_absolute() else self.base_dir / out

    @property
    def report_title(self) -> str:
        return self.title or f"flatscore · {self.name}"


def study_json(study: Study) -> str:
    """A study as study.json: in the study file's units, so it reads back as a study file."""
    return study.model_dump_json(indent=2, by_alias=True, context=POINTS) + "\n"


def study_from_json(text: str) -> Study:
    """The study a study.json records (`study_json`'s inverse)."""
    return Study.model_validate_json(text, context=POINTS)
