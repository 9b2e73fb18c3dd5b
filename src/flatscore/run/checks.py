"""The checks of a study that need the registries: what the schema (`flatscore.study`) cannot
decide from the file alone because plug-ins add to it (backend kinds and the study fields
each takes, compute settings, user simulators, executors, domains and their episode
sources, agents and their options, each backend kind's arm check).

`check_study` runs them in the order of the study's fields and raises one `InputError` per
study, naming the file and the field as a schema error would (`models.0.kind`, `models.0`
for a model as a whole, `(study)` for the study as a whole). It also resolves `domains:
[all]` to the registered built-in domains.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from flatscore.agents.base import agent_names, make_agent
from flatscore.domains import domain_names
from flatscore.errors import FieldOf, InputError
from flatscore.models.base import COMPUTES
from flatscore.models.shared import BACKENDS, arm_check, kind_needs, kind_takes, kinds_taking
from flatscore.run.executors import EXECUTORS
from flatscore.run.sources import source_of, sources
from flatscore.study import AGENT_KIND, BackendSpec, ModelSpec, Study, Tau2UserSpec, UserSpec
from flatscore.users.base import USERS, user_names

Loc = tuple[int | str, ...]
"""Where in the study a check looks, as a schema error's location (`("models", 0, "kind")`)."""
Check = tuple[Loc, Callable[[], object]]


def _kinds(field: str) -> str:
    """The backend kinds that take the study field `field` (`BACKENDS`' registrations)."""
    return "/".join(kinds_taking(field))


def _registered(name: str, known: list[str], kind: str) -> None:
    """Raise unless `name` is registered: the registry, not a `Literal`, lists the kinds."""
    if name not in known:
        raise ValueError(f"unknown {kind} {name!r} (known: {', '.join(known)})")


def check_executor_kind(kind: str) -> None:
    """`executor.kind` (or `--executor`): a registered executor."""
    _registered(kind, EXECUTORS.names(), "executor")


def check_model_kind(model: ModelSpec) -> None:
    """`kind`: a registered backend, or `agent`."""
    if model.kind != AGENT_KIND:
        _registered(model.kind, [*BACKENDS.names(), AGENT_KIND], "model kind")


def check_model_compute(model: ModelSpec) -> None:
    """`compute`: a registered compute setting."""
    if model.compute is not None:
        COMPUTES.check(model.compute)


def check_model_fields(model: ModelSpec) -> None:
    """The study fields the model's kind takes and needs (`register_backend`), for the
    model and each of its arms (an inject arm takes everything from its base)."""
    if kind_needs(model.kind, "path") and not model.path:
        raise ValueError(f"kind {model.kind!r} needs 'path': a .gguf file or a model folder")
    for arm_name, arm in model.arms.items():
        if arm.inject is not None:
            continue
        if arm.server is not None and not kind_takes(model.kind, "server"):
            raise ValueError(f"arm {arm_name!r}: server applies to kind {_kinds('server')} only")
        missing = [
            f
            for f in ("url", "served_model")
            if kind_needs(model.kind, f) and getattr(arm, f) is None and arm.server is None
        ]
        if missing:
            raise ValueError(
                f"arm {arm_name!r} of a kind {model.kind!r} model needs {' and '.join(missing)}"
            )
        if not kind_takes(model.kind, "url") and (
            arm.url is not None or arm.served_model is not None
        ):
            raise ValueError(
                f"arm {arm_name!r}: url/served_model apply to kind {_kinds('url')} only"
            )
        if not kind_takes(model.kind, "quant") and arm.quant is not None:
            raise ValueError(f"arm {arm_name!r}: quant applies to {_kinds('quant')} models only")
        if not kind_takes(model.kind, "file") and arm.file is not None:
            raise ValueError(f"arm {arm_name!r}: file applies to kind {_kinds('file')} only")
    for field in ("compute", "adapter", "server"):
        if not kind_takes(model.kind, field) and getattr(model, field) is not None:
            raise ValueError(f"{field} applies to {_kinds(field)} models only")


def check_domains(study: Study) -> None:
    """Every domain belongs to a registered episode source, and each source accepts the
    list; `[all]` becomes every built-in domain."""
    known = domain_names()
    if study.domains == ["all"]:
        study.domains = known
        return
    bad = [d for d in study.domains if source_of(d) is None]
    if bad:
        raise ValueError(
            f"unknown domain(s) {', '.join(bad)} (known: {', '.join(known)}, or "
            "tau2:<domain> for τ²-bench's own)"
        )
    for source in sources():
        source.check_domains(study.domains)


def backend_checks(spec: BackendSpec, at: Loc) -> list[Check]:
    """A backend's registered `kind` and `compute`, each with the field it names."""
    return [
        ((*at, "kind"), lambda: BACKENDS.check(spec.kind)),
        ((*at, "compute"), lambda: COMPUTES.check(spec.compute)),
    ]


def check_user_backend(user: UserSpec) -> None:
    """Whether the simulator is reached through a model: its registered factory says (it
    requires `backend`, or does not take one)."""
    if user.backend is None and USERS.takes(user.kind, "backend", required=True):
        raise ValueError(
            f"user simulator {user.kind!r} needs 'backend' (kind, url/served_model or path)"
        )
    if user.backend is not None and not USERS.takes(user.kind, "backend"):
        raise ValueError(f"'backend' does not apply to user simulator {user.kind!r} (no model)")


def check_tau2_user(user: Tau2UserSpec) -> None:
    """The kind's registered study fields (`register_backend`) decide: `url` and
    `served_model` for a server that is up, `path` where it is needed."""
    if kind_takes(user.kind, "url"):
        missing = [f for f in ("url", "served_model") if getattr(user, f) is None]
        if missing:
            raise ValueError(f"a user of kind {user.kind!r} needs {' and '.join(missing)}")
    elif user.url is not None or user.served_model is not None:
        raise ValueError(f"url/served_model apply to kind {_kinds('url')} only")
    if kind_needs(user.kind, "path") and not user.path:
        raise ValueError(f"kind {user.kind!r} needs 'path': a .gguf file or a model folder")


def check_inject_reach(study: Study) -> None:
    """Planted damage is applied by flatscore's episode loop only, so it cannot reach a
    domain another orchestrator runs (τ²'s, against a served model)."""
    injected = [f"{m.name}/{a}" for m in study.models for a, s in m.arms.items() if s.inject]
    unreached = [
        d for d in study.domains if (s := source_of(d)) is not None and not s.plants_damage
    ]
    if injected and unreached:
        raise ValueError(
            f"inject arms ({', '.join(injected)}) run on built-in domains only, "
            f"not on {', '.join(unreached)}"
        )


def check_sources(study: Study) -> None:
    """What each domain's source needs of the study (τ²: its `tau2` section)."""
    owners = {s.name: s for d in study.domains if (s := source_of(d)) is not None}
    for source in owners.values():
        source.check_study(study)


def registry_checks(study: Study) -> list[Check]:
    """Every registry check of `study` with the field it names, in the fields' order."""
    checks: list[Check] = []
    for i, model in enumerate(study.models):
        checks += [
            (("models", i, "kind"), partial(check_model_kind, model)),
            (("models", i, "compute"), partial(check_model_compute, model)),
            (("models", i), partial(check_model_fields, model)),
        ]
    checks.append((("domains",), lambda: check_domains(study)))
    user = study.user
    checks.append(
        (("user", "kind"), lambda: _registered(user.kind, user_names(), "user simulator"))
    )
    if user.backend is not None:
        checks += backend_checks(user.backend, ("user", "backend"))
    checks.append((("user",), lambda: check_user_backend(user)))
    checks.append((("executor", "kind"), lambda: check_executor_kind(study.executor.kind)))
    if study.tau2 is not None:
        tau2_user = study.tau2.user
        checks.append((("tau2", "user", "kind"), lambda: BACKENDS.check(tau2_user.kind)))
        checks.append((("tau2", "user"), lambda: check_tau2_user(tau2_user)))
    checks.append(((), lambda: check_inject_reach(study)))
    checks.append(((), lambda: check_sources(study)))
    return checks


def check_names(study: Study, file: str | None = None) -> None:
    """Agents and their options; precision formats and files (each backend kind's
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


def study_field(loc: Loc) -> str:
    """A study field's name as a study file's error names it (`models.0.kind`)."""
    return ".".join(map(str, loc)) or "(study)"


def check_registries(study: Study, file: str | None = None, field: FieldOf | None = None) -> None:
    """The registry checks the schema leaves out (`registry_checks`), the first failure as
    one `InputError` naming `file` and the field (`field(loc)`, e.g. a command's flag)."""
    for loc, check in registry_checks(study):
        try:
            check()
        except ValueError as exc:
            where = (field or study_field)(loc)
            raise InputError(str(exc), file=file, field=where or None) from None


def check_study(study: Study, file: str | None = None, field: FieldOf | None = None) -> Study:
    """Every check of a study that needs the registries (`check_registries`, then
    `check_names`); returns the study, its `domains: [all]` resolved."""
    check_registries(study, file, field)
    check_names(study, file)
    return study
