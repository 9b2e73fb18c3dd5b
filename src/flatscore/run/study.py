"""The study file: one YAML document that says what to run and how to analyse it.

A study is models × precision arms × domains (× repair on/off), run with paired seeds: every
arm of a model sees the same tasks, trials and user behaviour, so arms are compared task by
task. `load_study(path)` validates the file with pydantic and turns any mistake into one
`InputError` naming the file and the field (`models.0.arms.int4.url`). The reference is
`docs/studies.md`.

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
  vLLM / SGLang / llama.cpp serving BF16, FP8, AWQ checkpoints; or a server flatscore
  starts for the arm (`server`: llama.cpp's or vLLM's, `flatscore.models.servers`).
- `agent`: a registered agent without a model (`oracle`, `noop`, ...); each arm may pass it
  options. Smoke tests and pipelines checks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationInfo, field_validator, model_validator

from flatscore import defaults
from flatscore.agents.base import agent_names, make_agent
from flatscore.agents.inject import InjectSpec
from flatscore.agents.repair import RepairConfig
from flatscore.analysis.settings import POINTS, AnalysisSettings, Price
from flatscore.defaults import MAX_BUDGET, CountMode
from flatscore.domains import domain_names
from flatscore.errors import InputError, validating
from flatscore.models.base import COMPUTES, SamplingSpec
from flatscore.models.openai import Endpoint
from flatscore.models.server_spec import ServerSpec, arm_servers, merged
from flatscore.models.shared import (
    BACKENDS,
    BackendSpec,
    arm_check,
    kind_needs,
    kind_takes,
    kinds_taking,
)
from flatscore.run.tau2.spec import Tau2Spec
from flatscore.strict import StrictModel
from flatscore.users.base import USERS, user_names

AGENT_KIND = "agent"
"""The model kind without a backend: a registered agent (`AGENTS`); every other kind is a
registered backend (`flatscore.models.shared.BACKENDS`)."""
DEFAULT_STUDY_NAME = defaults.STUDY_NAME


def _kinds(field: str) -> str:
    """The backend kinds that take the study field `field` (`BACKENDS`' registrations)."""
    return "/".join(kinds_taking(field))


def _registered(name: str, known: list[str], kind: str) -> str:
    """`name` if its registry holds it: the registry, not a `Literal`, lists the kinds."""
    if name not in known:
        raise ValueError(f"unknown {kind} {name!r} (known: {', '.join(known)})")
    return name


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

    @field_validator("kind")
    @classmethod
    def _registered_kind(cls, value: str) -> str:
        if value == AGENT_KIND:
            return value
        known = [*BACKENDS.names(), AGENT_KIND]
        return _registered(value, known, "model kind")

    @field_validator("compute")
    @classmethod
    def _registered_compute(cls, value: str | None) -> str | None:
        return None if value is None else COMPUTES.check(value)

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
        if kind_needs(self.kind, "path") and not self.path:
            raise ValueError(f"kind {self.kind!r} needs 'path': a .gguf file or a model folder")
        for arm_name, arm in self.arms.items():
            if arm.inject is not None:
                base = self.arms.get(arm.inject.base)
                if base is None or base.inject is not None:
                    raise ValueError(
                        f"arm {arm_name!r}: inject.base must name another arm of this model "
                        f"that is not itself injected (arms: {', '.join(self.arms)})"
                    )
                given = [
                    f
                    for f in ("quant", "url", "served_model", "api_key_env", "file", "server")
                    if getattr(arm, f)
                ]
                if given or arm.options:
                    raise ValueError(
                        f"arm {arm_name!r}: an inject arm takes everything from its base arm "
                        f"{arm.inject.base!r}; remove {', '.join(given) or 'options'}"
                    )
                continue
            if arm.server is not None and not kind_takes(self.kind, "server"):
                raise ValueError(
                    f"arm {arm_name!r}: server applies to kind {_kinds('server')} only"
                )
            if arm.server is not None and arm.url is not None:
                raise ValueError(f"arm {arm_name!r}: give either url or server, not both")
            missing = [
                f
                for f in ("url", "served_model")
                if kind_needs(self.kind, f) and getattr(arm, f) is None and arm.server is None
            ]
            if missing:
                raise ValueError(
                    f"arm {arm_name!r} of a kind {self.kind!r} model needs {' and '.join(missing)}"
                )
            if not kind_takes(self.kind, "url") and (
                arm.url is not None or arm.served_model is not None
            ):
                raise ValueError(
                    f"arm {arm_name!r}: url/served_model apply to kind {_kinds('url')} only"
                )
            if self.kind != AGENT_KIND and arm.options:
                raise ValueError(f"arm {arm_name!r}: options apply to kind {AGENT_KIND} only")
            if not kind_takes(self.kind, "quant") and arm.quant is not None:
                raise ValueError(
                    f"arm {arm_name!r}: quant applies to {_kinds('quant')} models only"
                )
            if not kind_takes(self.kind, "file") and arm.file is not None:
                raise ValueError(f"arm {arm_name!r}: file applies to kind {_kinds('file')} only")
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
            own = [
                f
                for f in ("quant", "url", "served_model", "checkpoint", "file", "server")
                if getattr(arm, f)
            ]
            if own or arm.options:
                raise ValueError(
                    f"arm {arm_name!r}: a control replicates {arm.control_of!r} as it is; "
                    f"remove {', '.join(own or ['options'])}"
                )
        for field in ("compute", "adapter", "server"):
            if not kind_takes(self.kind, field) and getattr(self, field) is not None:
                raise ValueError(f"{field} applies to {_kinds(field)} models only")
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

    def backend(self, arm: str, out_dir: Path | None = None) -> BackendSpec | None:
        """The backend of one arm (None for kind `agent`); a control arm gets the backend of
        the arm it replicates (its own response cache, so it never replays that arm's), an
        inject arm its base's (the same loaded model and response cache)."""
        spec = self.arms[self.played_by(arm)]
        if self.kind == AGENT_KIND:
            return None
        if kind_takes(self.kind, "url"):  # a server reached over HTTP
            cache = None
            if self.cache and out_dir is not None:
                cache = str(out_dir / "cache" / f"{self.name}__{arm}.sqlite")
            endpoint = self.model_dump(include=set(Endpoint.model_fields))
            server = self.server_of(arm)  # None: a server that is already up at `url`
            return BackendSpec(
                **{**endpoint, "api_key_env": spec.api_key_env or self.api_key_env},
                kind=self.kind,
                url=spec.url,
                served_model=spec.served_model or (self.name if server else None),
                cache_path=cache,
                server=server,
            )
        if kind_takes(self.kind, "file"):  # an arm may be a file of its own
            return BackendSpec(
                kind=self.kind,
                path=spec.file or self.path or "embedded",
                quant="ref" if spec.file else spec.quant or self.played_by(arm),
                threads=self.threads,
                kv_memory_mb=self.kv_memory_mb,
            )
        # Arms played by the same weights (a control, an inject arm and their base) share
        # one loaded model and so one engine: it gets room for each of them (sequences in
        # a pass, KV memory), as if each had its own; else they queue behind one arm's
        # share and the whole study waits for that engine. `engine_per_arm`: a copy each.
        sharing = (
            1
            if self.engine_per_arm
            else sum(self.played_by(a) == self.played_by(arm) for a in self.arms)
        )
        return BackendSpec(
            kind=self.kind,
            path=self.path or "embedded",
            adapter=self.adapter,
            quant=spec.quant or self.played_by(arm),
            threads=self.threads,
            compute=self.compute or "fp32",
            kv_memory_mb=self.kv_memory_mb * sharing,
            max_batch=defaults.MAX_BATCH * sharing,
            # None (the engine's default) unless asked: specs of studies without it stay
            # as they were, and so do their cached backends.
            private_prefix=True if self.private_prefix else None,
            instance=arm if self.engine_per_arm else None,
        )


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

    @field_validator("kind")
    @classmethod
    def _registered_user(cls, value: str) -> str:
        return _registered(value, user_names(), "user simulator")

    @model_validator(mode="after")
    def _needs_backend(self) -> UserSpec:
        """Whether the simulator is reached through a model: its registered factory says
        (it requires `backend`, or does not take one)."""
        if self.backend is None and USERS.takes(self.kind, "backend", required=True):
            raise ValueError(
                f"user simulator {self.kind!r} needs 'backend' (kind, url/served_model or path)"
            )
        if self.backend is not None and not USERS.takes(self.kind, "backend"):
            raise ValueError(f"'backend' does not apply to user simulator {self.kind!r} (no model)")
        return self


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

    @field_validator("kind")
    @classmethod
    def _registered_executor(cls, value: str) -> str:
        from flatscore.run.executors import EXECUTORS  # imports this module: not at its top

        return _registered(value, EXECUTORS.names(), "executor")


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
    def _known_domains(cls, value: list[str]) -> list[str]:
        from flatscore.run.sources import source_of, sources

        known = domain_names()
        if value == ["all"]:
            return known
        bad = [d for d in value if source_of(d) is None]
        if bad:
            raise ValueError(
                f"unknown domain(s) {', '.join(bad)} (known: {', '.join(known)}, or "
                "tau2:<domain> for τ²-bench's own)"
            )
        if len(set(value)) != len(value):
            raise ValueError("domains must be unique")
        for source in sources():
            source.check_domains(value)
        return value

    @model_validator(mode="after")
    def _inject_on_builtin_domains(self) -> Study:
        """Planted damage is applied by flatscore's episode loop only, so it cannot reach a
        domain another orchestrator runs (τ²'s, against a served model)."""
        from flatscore.run.sources import source_of

        injected = [f"{m.name}/{a}" for m in self.models for a, s in m.arms.items() if s.inject]
        unreached = [
            d for d in self.domains if (s := source_of(d)) is not None and not s.plants_damage
        ]
        if injected and unreached:
            raise ValueError(
                f"inject arms ({', '.join(injected)}) run on built-in domains only, "
                f"not on {', '.join(unreached)}"
            )
        return self

    @model_validator(mode="after")
    def _sources_satisfied(self) -> Study:
        """What each domain's source needs of the study (τ²: its `tau2` section)."""
        from flatscore.run.sources import source_of

        owners = {s.name: s for d in self.domains if (s := source_of(d)) is not None}
        for source in owners.values():
            source.check_study(self)
        return self

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


def check_names(study: Study, file: str | None = None) -> None:
    """Checks that need registries (agents; precision formats and files: each backend kind's
    `arm_check`)."""
    for i, model in enumerate(study.models):
        if model.kind == AGENT_KIND and model.agent not in agent_names():
            raise InputError(
                f"unknown agent {model.agent!r} (known: {', '.join(agent_names())})",
                file=file,
                field=f"models.{i}.agent",
            )
        if model.kind == AGENT_KIND:
            for arm_name, arm in model.arms.items():
                if arm.inject is not None:
                    continue  # its base arm is checked
                try:
                    make_agent(model.agent or "", **arm.options)
                except (TypeError, ValueError) as exc:
                    raise InputError(
                        f"agent {model.agent!r}: {exc}",
                        file=file,
                        field=f"models.{i}.arms.{arm_name}.options",
                    ) from None
        check_arms = arm_check(model.kind)  # the kind's own: formats, files
        if check_arms is not None:
            check_arms(model, i, file)


def parse_study(data: Any, *, file: str | None = None, base_dir: Path | None = None) -> Study:
    """Validate a study from already-parsed YAML/JSON data."""
    if not isinstance(data, dict):
        raise InputError("a study file must be a mapping (key: value)", file=file)
    with validating(
        file=file,
        field=lambda loc: ".".join(map(str, loc)) or "(study)",
        extra="unknown field (check the spelling; see docs/studies.md)",
    ):
        study = Study.model_validate(
            {**data, "base_dir": base_dir or Path(".")},
            context={**POINTS, "base_dir": base_dir or Path(".")},
        )
    check_names(study, file)
    return study


def study_json(study: Study) -> str:
    """A study as study.json: in the study file's units, so it reads back as a study file."""
    return study.model_dump_json(indent=2, by_alias=True, context=POINTS) + "\n"


def study_from_json(text: str) -> Study:
    """The study a study.json records (`study_json`'s inverse)."""
    return Study.model_validate_json(text, context=POINTS)


def load_study(path: str | Path) -> Study:
    """Read and validate a study file (YAML); bad input raises one `InputError`."""
    path = Path(path)
    if not path.is_file():
        raise InputError("study file not found", file=str(path))
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise InputError(f"not valid YAML{where}: {problem}", file=str(path)) from None
    except UnicodeDecodeError:
        raise InputError("not a UTF-8 text file", file=str(path)) from None
    return parse_study(data, file=str(path), base_dir=path.parent)
