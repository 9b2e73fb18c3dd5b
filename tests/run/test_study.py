"""The study file: valid files load, every mistake is one InputError naming file and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from flatscore.errors import InputError
from flatscore.run.arm_backend import arm_backend
from flatscore.run.study import load_study, parse_study
from flatscore.study import Study
from run_files import study_refusal

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def write(tmp_path: Path, data: object, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data, "utf-8")
    return path


def minimal(**extra: object) -> dict[str, object]:
    return {"models": [{"name": "o", "kind": "agent", "agent": "oracle", "arms": ["ref"]}], **extra}


@pytest.mark.parametrize("name", ["smoke.yaml", "embedded.yaml", "vllm.yaml"])
def test_examples_load(name: str) -> None:
    study = load_study(EXAMPLES / name)
    assert study.models and study.domains
    assert study.output_dir.is_relative_to(EXAMPLES)  # relative to the study file


def test_defaults_and_shorthands(tmp_path: Path) -> None:
    study = load_study(write(tmp_path, minimal(repair="both", domains=["all"])))
    assert study.domains == ["retail", "telecom"]
    assert study.repair.levels() == [False, True]
    assert study.error_budget.max_errors == 10  # τ²'s default: analysis default K = 9
    assert list(study.models[0].arms) == ["ref"]
    assert study.output_dir == tmp_path / "flatscore-out"


def test_backend_per_arm(tmp_path: Path) -> None:
    data = {
        "models": [
            {
                "name": "qwen",
                "kind": "openai",
                "api_key_env": "KEY",
                "arms": {
                    "bf16": {"url": "http://a:1/v1", "served_model": "q-bf16"},
                    "fp8": {"url": "http://b:1/v1", "served_model": "q-fp8", "api_key_env": "K2"},
                },
            },
            {"name": "smol", "kind": "embedded", "arms": {"ref": None, "w4": {"quant": "int4"}}},
        ]
    }
    study = load_study(write(tmp_path, data))
    bf16 = arm_backend(study.models[0], "bf16", tmp_path)
    assert bf16 is not None and bf16.url == "http://a:1/v1" and bf16.api_key_env == "KEY"
    assert bf16.cache_path == str(tmp_path / "cache" / "qwen__bf16.sqlite")
    fp8 = arm_backend(study.models[0], "fp8")
    assert fp8 is not None and fp8.api_key_env == "K2" and fp8.cache_path is None
    w4 = arm_backend(study.models[1], "w4")
    assert w4 is not None and (w4.kind, w4.path, w4.quant) == ("embedded", "embedded", "int4")
    assert w4.compute == "fp32"  # the default
    data["models"][1]["compute"] = "bf16"  # type: ignore[index]
    w4 = arm_backend(load_study(write(tmp_path, data)).models[1], "w4")
    assert w4 is not None and w4.compute == "bf16"
    assert w4.adapter is None
    data["models"][1]["adapter"] = "train/adapter"  # type: ignore[index]
    w4 = arm_backend(load_study(write(tmp_path, data)).models[1], "w4")
    # merged before the arm; relative to the study file's folder, like `output`
    assert w4 is not None and w4.adapter == str((tmp_path / "train" / "adapter").resolve())


def test_arms_sharing_weights_share_one_engine_with_room_for_each(tmp_path: Path) -> None:
    """A control and an inject arm play on their base's loaded model: that one engine gets
    each arm's sequences and KV memory (study v2's `ref` engine held three arms' episodes in
    one arm's 16 rows and 1 GiB, and the whole study waited for it)."""
    arms = {
        "ref": None,
        "int8": None,
        "ref-control": {"control_of": "ref"},
        "ref-planted": {"inject": {"base": "ref", "role_confusion": 0.05}},
    }
    data = {"models": [{"name": "s", "kind": "embedded", "kv_memory_mb": 100, "arms": arms}]}
    model = load_study(write(tmp_path, data)).models[0]
    specs = {arm: arm_backend(model, arm) for arm in arms}
    assert specs["ref"] == specs["ref-control"] == specs["ref-planted"]  # one cached engine
    ref, int8 = specs["ref"], specs["int8"]
    assert ref is not None and int8 is not None
    assert (ref.max_batch, ref.kv_memory_mb) == (48, 300.0)
    assert (int8.max_batch, int8.kv_memory_mb) == (16, 100.0)

    data["models"][0]["engine_per_arm"] = True  # type: ignore[index]
    model = load_study(write(tmp_path, data)).models[0]
    own = {arm: arm_backend(model, arm) for arm in arms}
    assert len(set(own.values())) == 4  # four cached engines: one per arm
    for arm, spec in own.items():
        assert spec is not None and (spec.max_batch, spec.kv_memory_mb) == (16, 100.0)
        assert spec.quant == ("int8" if arm == "int8" else "ref") and spec.instance == arm


def test_private_prefix_reaches_the_engine_and_leaves_other_specs_alone(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """`private_prefix: true` asks each arm's (padded) engine to copy the shared system turn
    once per turn; unset, the spec is what it always was (the same cached backends)."""
    from flatscore.models.local import LocalBackend
    from flatscore.models.shared import clear_backends, get_backend

    data = {"models": [{"name": "s", "kind": "embedded", "arms": ["ref", "int8"]}]}
    plain = arm_backend(load_study(write(tmp_path, data)).models[0], "int8")
    assert plain is not None and plain.private_prefix is None
    data["models"][0]["private_prefix"] = True  # type: ignore[index]
    spec = arm_backend(load_study(write(tmp_path, data)).models[0], "int8")
    assert spec is not None and spec.private_prefix is True and spec.batch_invariant
    assert spec.model_copy(update={"private_prefix": None}) == plain
    local = spec.model_copy(update={"kind": "local", "path": str(tiny_model_dir)})
    try:
        for private in (True, None):
            backend = get_backend(local.model_copy(update={"private_prefix": private}))
            assert isinstance(backend, LocalBackend) and backend.engine.min_rows == 16
            assert backend.engine.private_prefix is bool(private)
    finally:
        clear_backends()


@pytest.mark.slow  # loads the embedded model once per arm
def test_engine_per_arm_loads_a_copy_per_arm() -> None:
    """Specs equal but for `instance` are separate cache entries: separate loaded models."""
    from flatscore.models.shared import clear_backends, get_backend
    from flatscore.study import BackendSpec

    spec = BackendSpec(kind="embedded", threads=1, kv_memory_mb=16)
    try:
        a, b = get_backend(spec), get_backend(spec.model_copy(update={"instance": "x"}))
        assert a is not b and get_backend(spec) is a
    finally:
        clear_backends()


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"models": []}, "models", "at least 1"),
        (minimal(trials=0), "trials", "greater than or equal to 1"),
        (minimal(domains=["bank"]), "domains", "unknown domain(s) bank"),
        (minimal(split="dev"), "split", "'train', 'test' or 'all'"),
        (minimal(colour="red"), "colour", "unknown field"),
        (minimal(repair="sometimes"), "repair.mode", "'off', 'on' or 'both'"),
        (minimal(analysis={"budgets": "0-x"}), "analysis.budgets", "bad budget list"),
        (minimal(analysis={"budgets": "0-5000"}), "analysis.budgets", "K above 1000"),
        (minimal(analysis={"budgets": [0, 5000]}), "analysis.budgets", "between 0 and 1000"),
        (minimal(analysis={"bootstrap": 10**9}), "analysis.bootstrap", "less than or equal"),
        (minimal(error_budget={"max_errors": 10**6}), "error_budget.max_errors", "less than"),
        (minimal(analysis={"tost_margin": 0}), "analysis.tost_margin", "(0, 100) points"),
        (minimal(executor={"kind": "slurm"}), "executor.kind", "known: local, ray"),
        (minimal(user={"kind": "robot"}), "user.kind", "known: llm, scripted"),
        (
            {"models": [{"name": "q", "kind": "openai", "arms": {"bf16": {"url": "http://x"}}}]},
            "models.0",
            "needs served_model",
        ),
        (
            {"models": [{"name": "q", "kind": "agent", "arms": ["ref"]}]},
            "models.0",
            "needs 'agent'",
        ),
        (
            {"models": [{"name": "s", "kind": "local", "arms": ["ref"]}]},
            "models.0",
            "needs 'path'",
        ),
        (
            {"models": [{"name": "s", "kind": "embedded", "arms": {"ref": {"url": "http://x"}}}]},
            "models.0",
            "url/served_model apply to kind openai only",
        ),
        (
            {"models": [{"name": "s", "arms": ["ref", "ref"]}]},
            "models.0.arms",
            "unique",
        ),
        (
            {"models": [{"name": "s", "arms": {"int9": {}}}]},
            "models.0.arms.int9.(name)",
            "unknown precision format 'int9'",
        ),
        (
            {"models": [{"name": "s", "arms": {"w": {"quant": "int9"}}}]},
            "models.0.arms.w.quant",
            "unknown precision format 'int9'",
        ),
        (
            {"models": [{"name": "o", "kind": "agent", "agent": "genius", "arms": ["ref"]}]},
            "models.0.agent",
            "unknown agent 'genius'",
        ),
        (minimal(repair={"mode": "on", "channels": ["typos"]}), "repair.channels", "typos"),
        (
            {"models": [minimal()["models"][0], minimal()["models"][0]]},  # type: ignore[index]
            "models",
            "model names must be unique",
        ),
        (minimal(user={"kind": "llm"}), "user", "needs 'backend'"),
        (
            {"models": [{"name": "s", "compute": "fp12", "arms": ["ref"]}]},
            "models.0.compute",
            "unknown compute 'fp12' (known: bf16, fp16, fp32)",
        ),
        (
            {
                "models": [
                    {
                        "name": "q",
                        "kind": "openai",
                        "compute": "bf16",
                        "arms": {"a": {"url": "http://x", "served_model": "m"}},
                    }
                ]
            },
            "models.0",
            "compute applies to embedded/local models only",
        ),
        (
            {"models": [{"name": "g", "kind": "gguf", "adapter": "lora/", "arms": ["ref"]}]},
            "models.0",
            "adapter applies to embedded/local models only",
        ),
    ],
)
def test_bad_study_names_file_and_field(
    tmp_path: Path, data: dict[str, object], field: str, words: str
) -> None:
    err = study_refusal(write(tmp_path, data))
    assert err.field == field and words in err.message


def test_not_yaml_or_not_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"not valid YAML at line 3, column 3"):
        load_study(write(tmp_path, "name: x\nmodels: [\n  - : :\n"))
    with pytest.raises(InputError, match="must be a mapping"):
        load_study(write(tmp_path, "- a\n- b\n"))
    with pytest.raises(InputError, match="study file not found"):
        load_study(tmp_path / "missing.yaml")


def test_parse_study_roundtrips_through_json() -> None:
    study = parse_study(minimal(trials=3, seed=7))
    again = Study.model_validate_json(study.model_dump_json())
    assert again == study


def test_what_a_model_kind_takes_comes_from_its_registration(tmp_path: Path) -> None:
    """Which study fields a backend kind takes or needs is declared where it is registered
    (`register_backend`), not spelled in the study: a kind registered later is named in
    the one-line refusals and gets what it declared."""
    from flatscore.models.shared import BACKENDS, register_backend
    from flatscore.study import ModelSpec

    def refusal(model: dict[str, object]) -> str:
        path = write(tmp_path, {"models": [model]})
        return study_refusal(path).one_line().removeprefix(f"{path}, ")

    bf16 = {"name": "q", "kind": "remote", "compute": "bf16", "arms": ["a"]}
    served = {"url": "u", "served_model": "m"}
    openai = {"name": "q", "kind": "openai", "arms": {"a": served}}
    assert refusal({**openai, "compute": "bf16"}) == (
        "field 'models.0': compute applies to embedded/local models only"
    )
    register_backend("remote", lambda spec: None, takes=["compute"], needs=["path"])  # type: ignore[arg-type,return-value]
    try:
        assert refusal(bf16) == (
            "field 'models.0': kind 'remote' needs 'path': a .gguf file or a model folder"
        )
        assert ModelSpec.model_validate({**bf16, "path": "p"}).compute == "bf16"
        assert refusal({**openai, "compute": "bf16"}) == (
            "field 'models.0': compute applies to embedded/local/remote models only"
        )
        assert refusal({**openai, "arms": {"a": {**served, "quant": "q"}}}) == (
            "field 'models.0': arm 'a': quant applies to embedded/gguf/local models only"
        )
        assert refusal({**openai, "arms": {"a": {"url": "u"}}}) == (
            "field 'models.0': arm 'a' of a kind 'openai' model needs served_model"
        )
    finally:
        BACKENDS.unregister("remote")
    assert refusal({**bf16, "path": "p"}).startswith(
        "field 'models.0.kind': unknown model kind 'remote' (known: embedded, gguf, local, openai"
    )


def test_a_kinds_arm_check_is_the_one_it_registered(tmp_path: Path) -> None:
    """The study runs the arm check a backend kind registered (`check_arms`), not one
    guessed from the fields it takes: a kind taking `compute` is not held to `ARMS`
    unless it says so, and its own check names the field it refuses."""
    from flatscore.models.arm_checks import check_gguf_arms, check_torch_arms
    from flatscore.models.shared import BACKENDS, arm_check, register_backend

    assert arm_check("embedded") is arm_check("local") is check_torch_arms
    assert arm_check("gguf") is check_gguf_arms
    assert arm_check("openai") is None

    def only_fast(model: Any, i: int, file: str | None) -> None:
        for name in model.arms:
            if name != "fast":
                raise InputError("not a fast arm", file=file, field=f"models.{i}.arms.{name}")

    def study(kind: str, arm: str) -> Path:
        return write(tmp_path, {"models": [{"name": "q", "kind": kind, "arms": [arm]}]})

    register_backend("remote", lambda spec: None, takes=["compute"])  # type: ignore[arg-type,return-value]
    register_backend("picky", lambda spec: None, takes=["compute"], check_arms=only_fast)  # type: ignore[arg-type,return-value]
    try:
        assert list(load_study(study("remote", "fast")).models[0].arms) == ["fast"]  # no ARMS
        with pytest.raises(InputError) as info:
            load_study(study("picky", "slow"))
        assert info.value.field == "models.0.arms.slow" and info.value.message == "not a fast arm"
        assert list(load_study(study("picky", "fast")).models[0].arms) == ["fast"]
    finally:
        BACKENDS.unregister("remote")
        BACKENDS.unregister("picky")


def test_kinds_come_from_the_registries() -> None:
    """A plug-in registered under a new name is a valid kind: no `Literal` restates names.
    The schema takes any name (it is data); loading the study checks it against the
    registries, naming the field."""
    from flatscore.models.shared import BACKENDS
    from flatscore.run.executors import EXECUTORS, LocalExecutor
    from flatscore.study import BackendSpec, ExecutorSpec, ModelSpec, UserSpec
    from flatscore.users.base import USERS

    data = {
        "models": [{"name": "m", "kind": "remote", "arms": ["a"]}],
        "domains": ["retail"],
        "user": {"kind": "echo"},
        "executor": {"kind": "mine"},
    }
    EXECUTORS.register("mine", lambda spec, concurrency: LocalExecutor(concurrency))
    USERS.register("echo", lambda **_: None)  # type: ignore[arg-type,return-value]
    BACKENDS.register("remote", lambda spec: None)  # type: ignore[arg-type,return-value]
    try:
        study = parse_study(data)
        assert (study.executor.kind, study.user.kind, study.models[0].kind) == (
            "mine",
            "echo",
            "remote",
        )
    finally:
        EXECUTORS.unregister("mine")
        USERS.unregister("echo")
        BACKENDS.unregister("remote")
    assert ExecutorSpec(kind="mine").kind == "mine"  # the schema alone: data
    assert UserSpec(kind="echo").kind == "echo"
    assert BackendSpec(kind="remote").kind == "remote"
    assert ModelSpec(name="m", kind="remote", arms={"a": {}}).kind == "remote"
    with pytest.raises(InputError) as info:
        parse_study(data)
    assert info.value.field == "models.0.kind"
    assert info.value.message.startswith("unknown model kind 'remote' (known: ")
    with pytest.raises(InputError) as info:
        parse_study(
            {
                **data,
                "models": [{"name": "m", "kind": "agent", "agent": "oracle", "arms": ["a"]}],
                "user": {},
            }
        )
    assert info.value.field == "executor.kind"
    assert info.value.message.startswith("unknown executor 'mine' (known: ")
