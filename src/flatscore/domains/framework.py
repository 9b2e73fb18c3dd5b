"""The domain framework: a typed database, tools as typed methods, tasks, and their evaluation.

A domain (τ²-style) is a pydantic database loaded from a data file, an agent toolkit, an
optional user toolkit (dual control: the user's phone), a short policy and a list of tasks.

- **Tools** are methods of a `Toolkit` subclass decorated with `@tool("read" | "write")`.
  Their OpenAI function schemas (`{"type": "function", "function": {"name", "description",
  "parameters"}}`) come from the signature (types, defaults, `Annotated[..., Field(...)]`
  constraints) and the docstring's first paragraph (plus `Args:` lines). Arguments are
  validated by a pydantic model built from the same signature.
- **Errors** are results, never exceptions: `Environment.execute` turns every failed call into
  `ToolResult(error=True, text="Error: ...", error_kind=...)` with `error_kind` one of
  `unknown_tool` (`Error: Tool 'x' not found.`), `bad_arguments` (names the argument),
  `entity_not_found` (`... 'id' not found.`), `precondition` (a policy rule, with the reason)
  or `other` (a bug in a tool). Tools raise `NotFound` / `Precondition` / `ToolError`.
- **Tasks** carry a user scenario, optional setup actions (applied to a fresh database before
  the episode, like τ²'s initialization actions; they may call `@setup`-marked methods that
  are not tools), the gold actions, device assertions and the information the agent must
  communicate. `evaluate` gives reward 1 only when the final database hash equals the hash
  after replaying the gold actions on a fresh copy, every device assertion holds and every
  `communicate` item appears in the agent's messages.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, TypeVar, get_type_hints

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from flatscore.episode import Message, ToolCall, ToolLists, ToolResult
from flatscore.registry import Registry

ToolKind = Literal["read", "write"]
ErrorKind = Literal["unknown_tool", "bad_arguments", "entity_not_found", "precondition", "other"]
Split = Literal["train", "test"]

DB = TypeVar("DB", bound=BaseModel)
F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")


# --------------------------------------------------------------------------- errors


class ToolError(Exception):
    """A tool refused a call. `text` is shown to the caller after `Error: `."""

    def __init__(self, text: str, kind: ErrorKind = "other") -> None:
        super().__init__(text)
        self.text = text
        self.kind: ErrorKind = kind


class NotFound(ToolError):
    """A well-formed call naming a record that does not exist."""

    def __init__(self, entity: str, key: str) -> None:
        super().__init__(f"{entity} '{key}' not found.", "entity_not_found")


def lookup(table: Mapping[str, R], entity: str, key: str) -> R:
    """`table[key]`, or `NotFound(entity, key)`: the error a model sees for a missing record."""
    record = table.get(key)
    if record is None:
        raise NotFound(entity, key)
    return record


class Precondition(ToolError):
    """A valid call refused by a domain rule; the text says which rule."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, "precondition")


def unknown_tool_text(name: str) -> str:
    """τ²'s exact text for a name that is not one of the caller's tools."""
    return f"Error: Tool '{name}' not found."


# --------------------------------------------------------------------------- tools


def tool(kind: ToolKind) -> Callable[[F], F]:
    """Mark a toolkit method as a tool the agent (or user) may call."""

    def mark(fn: F) -> F:
        fn._flatscore_tool = kind  # type: ignore[attr-defined]
        return fn

    return mark


def setup(fn: F) -> F:
    """Mark a toolkit method as usable by task setup actions only (never offered as a tool)."""
    fn._flatscore_setup = True  # type: ignore[attr-defined]
    return fn


def _docstring_parts(doc: str | None) -> tuple[str, dict[str, str]]:
    """First paragraph as the description; `Args:` entries as parameter descriptions
    (Google style, parsed by `docstring_parser`)."""
    if not doc:
        return "", {}
    parsed = docstring_parser.parse(doc, style=docstring_parser.DocstringStyle.GOOGLE)
    paragraph = [parsed.short_description or ""]
    if parsed.long_description and not parsed.blank_after_short_description:
        paragraph.append(parsed.long_description.split("\n\n")[0])  # the paragraph goes on
    params = {p.arg_name: " ".join((p.description or "").split()) for p in parsed.params}
    return " ".join(" ".join(paragraph).split()), params


def _strip_titles(schema: Any) -> Any:
    """Drop pydantic's `title` keys: they cost prompt tokens and say nothing new."""
    if isinstance(schema, list):
        return [_strip_titles(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key == "properties":
            out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
        else:
            out[key] = _strip_titles(value)
    return out


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, kind, description and argument model."""

    name: str
    kind: ToolKind
    description: str
    args_model: type[BaseModel]

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-calling schema (a fresh copy: callers may change it)."""
        params = copy.deepcopy(_parameters(self.args_model))
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": params},
        }


@functools.cache
def _parameters(args_model: type[BaseModel]) -> dict[str, Any]:
    """A tool's `parameters` schema, built once per argument model: pydantic rebuilds a JSON
    schema on every call (~0.3 ms per tool), and every agent and user turn lists the tools."""
    params = _strip_titles(args_model.model_json_schema())
    params.pop("additionalProperties", None)
    params.setdefault("properties", {})
    return params


def _build_spec(name: str, fn: Callable[..., Any], kind: ToolKind) -> ToolSpec:
    description, param_docs = _docstring_parts(fn.__doc__)
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    for pname, param in inspect.signature(fn).parameters.items():
        if pname == "self":
            continue
        annotation = hints.get(pname, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (annotation, Field(default, description=param_docs.get(pname)))
    model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    return ToolSpec(name=name, kind=kind, description=description, args_model=model)


def _format_validation_error(tool_name: str, err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    if first["type"] == "missing":
        return f"{tool_name}() missing required argument '{loc}'."
    if first["type"] == "extra_forbidden":
        return f"{tool_name}() got an unexpected argument '{loc}'."
    return f"{tool_name}() invalid value for argument '{loc}': {first['msg']}."


def _to_jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_jsonable(v) for k, v in value.items()}
    return value


def format_result(value: Any) -> str:
    """A tool's return value as the text the caller sees (strings verbatim, the rest JSON)."""
    if isinstance(value, str):
        return value
    return json.dumps(_to_jsonable(value), ensure_ascii=False)


class Toolkit(Generic[DB]):
    """Tools bound to one database copy. Subclasses define `@tool` methods."""

    _specs: ClassVar[dict[str, ToolSpec]]

    def __init__(self, db: DB) -> None:
        self.db = db

    @classmethod
    def specs(cls) -> dict[str, ToolSpec]:
        if "_specs" not in cls.__dict__:
            cls._specs = _collect_specs(cls)
        return cls._specs

    @classmethod
    def schemas(cls) -> list[dict[str, Any]]:
        return [spec.schema() for spec in cls.specs().values()]

    @classmethod
    def tool_names(cls) -> list[str]:
        return list(cls.specs())

    def call(self, name: str, arguments: dict[str, Any] | str) -> str:
        """Run one tool. Raises ToolError (with its kind) when the call fails."""
        spec = self.specs().get(name)
        if spec is None:
            raise ToolError(f"Tool '{name}' not found.", "unknown_tool")
        if not isinstance(arguments, dict):
            raise ToolError(f"{name}() arguments are not a valid JSON object.", "bad_arguments")
        try:
            args = spec.args_model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolError(_format_validation_error(name, exc), "bad_arguments") from None
        method = getattr(self, name)
        return format_result(method(**{k: getattr(args, k) for k in type(args).model_fields}))

    def run_setup(self, name: str, arguments: dict[str, Any]) -> None:
        """Apply one task setup action: a tool or a `@setup` method."""
        method = getattr(self, name, None)
        if method is None or not (
            getattr(method, "_flatscore_setup", False) or name in self.specs()
        ):
            raise ValueError(f"{type(self).__name__} has no setup action '{name}'")
        method(**arguments)


def _collect_specs(cls: type) -> dict[str, ToolSpec]:
    specs: dict[str, ToolSpec] = {}
    for name, fn in inspect.getmembers(cls, inspect.isfunction):
        kind = getattr(fn, "_flatscore_tool", None)
        if kind is not None:
            specs[name] = _build_spec(name, fn, kind)
    # Definition order reads better than alphabetical in a prompt.
    order = {name: i for i, name in enumerate(vars_in_mro_order(cls))}
    return dict(sorted(specs.items(), key=lambda kv: order.get(kv[0], 1 << 30)))


def vars_in_mro_order(cls: type) -> list[str]:
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        for name in vars(klass):
            if name not in names:
                names.append(name)
    return names


# --------------------------------------------------------------------------- tasks


class Action(BaseModel):
    """One tool call in a task's gold solution or setup."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    requestor: Literal["agent", "user"] = "agent"


class Ask(BaseModel):
    """The oracle asks the user for `keys` (scenario `known_info` keys) before gold action
    number `before`."""

    model_config = ConfigDict(extra="forbid")

    before: int = 0
    keys: list[str]


class DeviceAssertion(BaseModel):
    """A check on the user's device state at the end: `state[field] == value`."""

    model_config = ConfigDict(extra="forbid")

    field: str
    value: Any


class UserScenario(BaseModel):
    """What the simulated user wants and knows.

    `requests` are opening phrasings (the scripted user picks one by seed);
    `known_info` is what it can tell the agent when asked (keys such as `email`, `first_name`,
    `last_name`, `zip`, `phone_number`); `instructions` is the τ²-style text for LLM users.
    """

    model_config = ConfigDict(extra="forbid")

    requests: list[str]
    known_info: dict[str, str] = Field(default_factory=dict)
    instructions: str


class Task(BaseModel):
    """One task: scenario, setup, gold solution and evaluation criteria."""

    model_config = ConfigDict(extra="forbid")

    id: str
    domain: str
    template: str
    split: Split
    scenario: UserScenario
    setup: list[Action] = Field(default_factory=list)
    actions: list[Action]
    device_assertions: list[DeviceAssertion] = Field(default_factory=list)
    communicate: list[str] = Field(default_factory=list)
    asks: list[Ask] = Field(default_factory=list)
    final_message: str = ""


class Evaluation(BaseModel):
    """Reward 1 only when every component is 1."""

    reward: float
    breakdown: dict[str, float]


# --------------------------------------------------------------------------- domain + env


def canonical_hash(db: BaseModel) -> str:
    """A stable hash of a database's content (sorted keys, JSON mode)."""
    data = json.dumps(db.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


class UserToolkit(Toolkit[DB]):
    """The user's own tools (dual control). Also knows how to phrase and recognise requests
    to use them, which the oracle and the scripted user need."""

    def __init__(self, db: DB, task: Task) -> None:
        super().__init__(db)
        self.task = task

    def state(self) -> dict[str, Any]:
        """The device state that task assertions check."""
        return {}

    @classmethod
    def instruction(cls, action: Action) -> str:
        """How an agent asks the user to perform `action`."""
        raise NotImplementedError

    @classmethod
    def parse_requests(cls, text: str) -> list[Action]:
        """The actions an agent's message asks the user to perform, in order."""
        raise NotImplementedError


class Domain(Generic[DB]):
    """A domain: database type and file, toolkits, policy and tasks (from a JSON file)."""

    def __init__(
        self,
        *,
        name: str,
        policy: str,
        db_type: type[DB],
        agent_toolkit: type[Toolkit[DB]],
        user_toolkit: type[UserToolkit[DB]] | None,
        data_dir: Path,
    ) -> None:
        self.name = name
        self.policy = policy
        self.db_type = db_type
        self.agent_toolkit = agent_toolkit
        self.user_toolkit = user_toolkit
        self.data_dir = data_dir
        self._db_text: str | None = None
        self._tasks: list[Task] | None = None
        self._gold_hash: dict[str, str] = {}

    @classmethod
    def from_folder(
        cls,
        folder: Path,
        *,
        db_type: type[DB],
        agent_toolkit: type[Toolkit[DB]],
        user_toolkit: type[UserToolkit[DB]] | None = None,
    ) -> Domain[DB]:
        """A domain kept in one folder: named after it, its policy (the agent's system
        prompt) in `policy.md`, its data in `db.json` and `tasks.json`."""
        return cls(
            name=folder.name,
            policy=(folder / "policy.md").read_text(encoding="utf-8").strip(),
            db_type=db_type,
            agent_toolkit=agent_toolkit,
            user_toolkit=user_toolkit,
            data_dir=folder,
        )

    # data
    def load_db(self) -> DB:
        """A fresh copy of the base database, validated from the file's text (kept): pydantic
        does that ~5x faster than deep-copying a loaded model (retail: 4 ms against 20 ms),
        and every episode loads two (its own and the gold replay's)."""
        if self._db_text is None:
            self._db_text = (self.data_dir / "db.json").read_text(encoding="utf-8")
        return self.db_type.model_validate_json(self._db_text)

    def tasks(self, split: str = "all") -> list[Task]:
        """Tasks of a split (`train`, `test` or `all`), in file order."""
        if self._tasks is None:
            raw = json.loads((self.data_dir / "tasks.json").read_text(encoding="utf-8"))
            self._tasks = [Task.model_validate(t) for t in raw]
        if split == "all":
            return list(self._tasks)
        if split not in ("train", "test"):
            raise ValueError(f"unknown split {split!r} (train, test or all)")
        return [t for t in self._tasks if t.split == split]

    def task(self, task_id: str) -> Task:
        for t in self.tasks():
            if t.id == task_id:
                return t
        raise KeyError(task_id)

    # tools
    def agent_tool_schemas(self) -> list[dict[str, Any]]:
        return self.agent_toolkit.schemas()

    def user_tool_schemas(self) -> list[dict[str, Any]]:
        return self.user_toolkit.schemas() if self.user_toolkit else []

    def tool_lists(self) -> ToolLists:
        user = self.user_toolkit.tool_names() if self.user_toolkit else []
        return ToolLists(agent=self.agent_toolkit.tool_names(), user=user, source="run")

    def tool_kind(self, action: Action) -> ToolKind:
        kit = self.agent_toolkit if action.requestor == "agent" else self.user_toolkit
        assert kit is not None
        return kit.specs()[action.name].kind

    def needs_write(self, task: Task) -> bool:
        """Whether the gold solution changes anything (database or device)."""
        return any(self.tool_kind(a) == "write" for a in task.actions)

    # environment + evaluation
    def new_environment(self, task: Task) -> Environment:
        return Environment(self, task)

    def gold_hash(self, task: Task) -> str:
        """The database hash after replaying the gold actions on a fresh copy (cached)."""
        if task.id not in self._gold_hash:
            env = self.new_environment(task)
            for action in task.actions:
                env.apply(action)
            self._gold_hash[task.id] = env.db_hash()
        return self._gold_hash[task.id]

    def solved(self, task: Task, env: Environment, messages: Sequence[Message]) -> bool:
        """`evaluate(...).reward == 1`, cheapest checks first (the scripted user asks often)."""
        return (
            _communicated(task, messages)
            and _assertions_hold(task, env)
            and env.db_hash() == self.gold_hash(task)
        )

    def evaluate(self, task: Task, env: Environment, messages: Sequence[Message]) -> Evaluation:
        """τ²-style reward: database, device assertions and communicated info all hold."""
        db_ok = env.db_hash() == self.gold_hash(task)
        env_ok = _assertions_hold(task, env)
        comm_ok = _communicated(task, messages)
        breakdown = {
            "db": float(db_ok),
            "env_assertions": float(env_ok),
            "communicate": float(comm_ok),
        }
        return Evaluation(reward=float(db_ok and env_ok and comm_ok), breakdown=breakdown)


def _assertions_hold(task: Task, env: Environment) -> bool:
    state = env.device_state()
    return all(state.get(a.field) == a.value for a in task.device_assertions)


def _communicated(task: Task, messages: Sequence[Message]) -> bool:
    """Every `communicate` item appears in some agent text (case and commas ignored, as τ²)."""
    said = " ".join(
        (m.content or "").lower().replace(",", "") for m in messages if m.role == "assistant"
    )
    return all(item.lower().replace(",", "") in said for item in task.communicate)


class Environment:
    """One episode's world: a fresh database (with the task's setup applied) and toolkits."""

    def __init__(self, domain: Domain[Any], task: Task) -> None:
        self.domain = domain
        self.task = task
        self.db = domain.load_db()
        self.agent_tools = domain.agent_toolkit(self.db)
        self.user_tools = domain.user_toolkit(self.db, task) if domain.user_toolkit else None
        for action in task.setup:
            self._kit(action.requestor).run_setup(action.name, action.arguments)

    def _kit(self, requestor: str) -> Toolkit[Any]:
        if requestor == "user":
            if self.user_tools is None:
                raise ValueError(f"domain {self.domain.name} has no user tools")
            return self.user_tools
        return self.agent_tools

    def execute(self, call: ToolCall) -> ToolResult:
        """Run one call from the agent or the user; failures become error results."""
        if call.requestor == "user" and self.user_tools is None:
            kit_names: list[str] = []
        else:
            kit_names = self._kit(call.requestor).tool_names()
        if call.name not in kit_names:
            return ToolResult(
                call_id=call.id,
                requestor=call.requestor,
                error=True,
                text=unknown_tool_text(call.name),
                error_kind="unknown_tool",
            )
        try:
            text = self._kit(call.requestor).call(call.name, call.arguments)
        except ToolError as exc:
            return ToolResult(
                call_id=call.id,
                requestor=call.requestor,
                error=True,
                text=f"Error: {exc.text}",
                error_kind=exc.kind,
            )
        except Exception as exc:  # a bug in a tool: still a result, as τ² does
            return ToolResult(
                call_id=call.id,
                requestor=call.requestor,
                error=True,
                text=f"Error: {type(exc).__name__}: {exc}",
                error_kind="other",
            )
        return ToolResult(call_id=call.id, requestor=call.requestor, text=text)

    def apply(self, action: Action) -> str:
        """Apply a gold action; a gold action that fails is a bug in the task."""
        result = self.execute(
            ToolCall(
                id="gold", name=action.name, arguments=action.arguments, requestor=action.requestor
            )
        )
        if result.error:
            raise ValueError(f"gold action {action.name} failed in {self.task.id}: {result.text}")
        return result.text

    def db_hash(self) -> str:
        return canonical_hash(self.db)

    def device_state(self) -> dict[str, Any]:
        return self.user_tools.state() if self.user_tools else {}


DOMAINS: Registry[Domain[Any]] = Registry("domain", builtins="flatscore.domains", cached=True)
"""Domains by name, each loaded once; `flatscore.domains` registers retail and telecom."""
