"""What a study file says about a server flatscore starts for an endpoint arm (`server:`),
and what a started server was (`ServedBy`, recorded in every episode it served).

Plain data, no behaviour: the study schema validates it, `flatscore.models.servers` turns it
into a command line and a process. A model may give the settings its arms share
(`models[i].server`) and each arm its own weights (`arms.<arm>.server`); `arm_servers`
merges the two and refuses arms whose servers would differ in anything but their weights,
their extra `args` and their `port`, so every arm is served with the same flags.

Kinds:

- `llama-cpp`: llama.cpp's OpenAI-compatible server (`python -m llama_cpp.server`,
  llama-cpp-python's `[server]` packages, in the `gguf` extra) serving `model`, a GGUF file.
- `vllm`: vLLM's OpenAI-compatible server serving `checkpoint` (a folder or a Hugging Face
  hub id), with automatic tool choice and a tool-call parser.
- `flatscore`: `flatscore serve` serving `model` (a model folder, a GGUF file or
  `embedded`) in the precision `quant` with the `engine` `local` (torch) or `gguf`
  (llama.cpp): the τ² live runner's servers for in-process arms.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
)

from flatscore.strict import StrictModel

ServerKind = Literal["llama-cpp", "vllm", "flatscore"]

WEIGHTS_FIELDS = ("model", "checkpoint", "quant")
"""What tells one arm's server from another's: its weights."""
PER_ARM_FIELDS = (*WEIGHTS_FIELDS, "args", "port")
"""The fields arms may set differently; every other one is a flag shared by all arms."""

_ONLY_FOR: dict[str, tuple[str, ...]] = {
    "model": ("llama-cpp", "flatscore"),
    "checkpoint": ("vllm",),
    "chat_format": ("llama-cpp",),
    "chat_template": ("vllm",),
    "tool_call_parser": ("vllm",),
    "max_logprobs": ("vllm",),
    "gpu_memory_utilization": ("vllm",),
    "quant": ("flatscore", "llama-cpp"),
    "engine": ("flatscore",),
}
"""Fields that apply to some kinds only (the others apply to every kind)."""

NAMED_MODELS = ("embedded", "embedded-base")
"""Models named, not given as a path (`flatscore.models.embedded`)."""

_WEIGHTS_OF: dict[str, str] = {"llama-cpp": "model", "vllm": "checkpoint", "flatscore": "model"}


class ServerSpec(StrictModel):
    """A server to start for one arm. Every field is optional so that a model's shared
    settings and an arm's own can be given apart (`arm_servers` merges and checks them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ServerKind | None = None
    model: str | None = Field(
        None,
        description="llama-cpp: a GGUF file, or `embedded-base` / `embedded` (the shipped "
        "SmolLM2 file; the embedded agent as F16); flatscore: a model folder, GGUF or embedded",
    )
    checkpoint: str | None = Field(None, description="vllm: a checkpoint folder or hub id")
    quant: str | None = Field(
        None,
        description="flatscore: the arm's precision format; llama-cpp: a llama.cpp "
        "quantization type made from `model` by llama.cpp's quantizer (once, cached)",
    )
    engine: Literal["local", "gguf"] | None = Field(
        None, description="flatscore: torch (`local`) or llama.cpp (`gguf`)"
    )
    args: tuple[str, ...] = Field((), description="extra command-line arguments, as they are")
    chat_format: str | None = Field(
        None, description="llama-cpp: --chat_format (default chatml-function-calling)"
    )
    chat_template: str | None = Field(None, description="vllm: --chat-template (a file)")
    tool_call_parser: str | None = Field(
        None, description="vllm: --tool-call-parser (default hermes)"
    )
    max_model_len: int = Field(4096, ge=1, description="context length (tokens)")
    seed: int = Field(0, description="the server's seed")
    max_logprobs: int = Field(20, ge=0, description="vllm: most logprobs a request may ask")
    gpu_memory_utilization: float | None = Field(
        None,
        gt=0,
        le=1,
        description="vllm: share of GPU memory each server takes (arms share one GPU: "
        "give each at most 1/arms)",
    )
    threads: int = Field(1, ge=1, description="CPU threads (llama-cpp, flatscore)")
    port: int | None = Field(None, ge=1, le=65535, description="default: a free port")
    python: str | None = Field(None, description="the interpreter to run it (default: this one)")
    start_timeout_s: float = Field(600.0, gt=0, description="seconds until it must answer")

    @field_validator("model", "chat_template")
    @classmethod
    def _beside_the_study(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A relative file is the study file's (like `adapter`), `embedded` stays a name."""
        if value is None or value in NAMED_MODELS:
            return value
        path = Path(value).expanduser()
        base = info.context.get("base_dir") if isinstance(info.context, dict) else None
        if base is not None and not path.is_absolute():
            path = Path(base) / path
        return str(path.resolve()) if base is not None else str(path)

    @field_validator("checkpoint")
    @classmethod
    def _folder_beside_the_study(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A checkpoint is a folder (relative: the study file's) when one is there, else a
        hub id as it is."""
        if value is None:
            return None
        base = info.context.get("base_dir") if isinstance(info.context, dict) else None
        path = Path(value).expanduser()
        if not path.is_absolute() and base is not None and (Path(base) / path).exists():
            return str((Path(base) / path).resolve())
        return value

    @model_serializer(mode="wrap")
    def _given_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Only the fields given: a model's shared settings and an arm's own are merged by
        what each gives, so study.json must read back the same way (a default written out
        would override the model's setting)."""
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if k in self.model_fields_set}

    def shared_flags(self) -> dict[str, Any]:
        """The settings every arm's server must share."""
        return {f: getattr(self, f) for f in type(self).model_fields if f not in PER_ARM_FIELDS}

    def checked(self) -> ServerSpec:
        """This spec if it names a kind and that kind's weights and nothing another kind
        takes; else ValueError (one sentence)."""
        if self.kind is None:
            raise ValueError("server needs 'kind': llama-cpp, vllm or flatscore")
        weights = _WEIGHTS_OF[self.kind]
        if getattr(self, weights) is None:
            what = "a GGUF file" if self.kind == "llama-cpp" else "a folder or hub id"
            if self.kind == "flatscore":
                what = "a model folder, GGUF file or embedded"
            raise ValueError(f"a {self.kind} server needs '{weights}': {what}")
        wrong = [
            f for f in _ONLY_FOR if f in self.model_fields_set and self.kind not in _ONLY_FOR[f]
        ]
        if wrong:
            which = ", ".join(f"{f} ({'/'.join(_ONLY_FOR[f])})" for f in wrong)
            raise ValueError(f"not for a {self.kind} server: {which}")
        return self

    @property
    def weights(self) -> str:
        """What this server serves (its file, checkpoint, or model@quant)."""
        if self.kind == "flatscore" or self.quant is not None:
            return f"{self.model}@{self.quant or 'ref'}"
        return str(getattr(self, _WEIGHTS_OF[self.kind or "llama-cpp"]))


def merged(shared: ServerSpec | None, own: ServerSpec | None) -> ServerSpec | None:
    """An arm's server: the model's shared settings with the arm's own over them (`args`:
    the shared ones, then the arm's). None when neither gives one."""
    if own is None and shared is None:
        return None
    if own is None or shared is None:
        return own or shared
    values = {**shared.model_dump(exclude_unset=True), **own.model_dump(exclude_unset=True)}
    values["args"] = (*shared.args, *own.args)
    return ServerSpec.model_validate(values)


def arm_servers(
    shared: ServerSpec | None, own: dict[str, ServerSpec | None]
) -> dict[str, ServerSpec]:
    """Each arm's server (arms without one left out), checked, with the same flags across
    arms; else ValueError naming the arm and the field."""
    servers: dict[str, ServerSpec] = {}
    for arm, spec in own.items():
        server = merged(shared, spec) if spec is not None else None
        if server is None:
            continue
        try:
            servers[arm] = server.checked()
        except ValueError as exc:
            raise ValueError(f"arm {arm!r}: {exc}") from None
    first = next(iter(servers.items()), None)
    if first is not None:
        name, spec = first
        for arm, other in servers.items():
            differ = [f for f, v in other.shared_flags().items() if spec.shared_flags()[f] != v]
            if differ:
                raise ValueError(
                    f"arms {name!r} and {arm!r}: servers differ in {', '.join(differ)}; every "
                    "arm is served with the same flags (give them in the model's `server`), "
                    "only model/checkpoint/quant, args and port may differ"
                )
    return servers


class ServedBy(StrictModel):
    """A server flatscore started, as every episode it served records it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    version: str | None = None
    command: tuple[str, ...]
    url: str
    log: str
    pid: int | None = None
