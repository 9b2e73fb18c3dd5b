"""The study file's τ² part: what is accepted, what is refused (one line naming the field),
and τ²'s trial seeds. None of this needs τ²-bench installed."""

from __future__ import annotations

from typing import Any

import pytest

from flatscore.errors import InputError
from flatscore.run.study import parse_study
from flatscore.run.tau2.plan import tau2_seeds
from flatscore.study.tau2 import is_tau2_domain

MODEL = {"name": "m", "kind": "embedded", "arms": ["ref", "int4"]}
USER = {"user": {"kind": "embedded"}}


def _parse(**extra: Any) -> Any:
    return parse_study({"models": [MODEL], **extra}, file="s.yaml")


def test_tau2_domains_next_to_builtin_ones() -> None:
    study = _parse(domains=["telecom", "tau2:retail", "tau2:airline"], tau2=USER)
    assert study.tau2.max_steps == 200 and study.tau2.task_split == "base"
    assert [is_tau2_domain(d) for d in study.domains] == [False, True, True]


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        ({"domains": ["tau2:retail"]}, "(study)", "need a 'tau2' section"),
        ({"domains": ["tau2:shop"], "tau2": USER}, "domains", "unknown τ² domain 'tau2:shop'"),
        ({"domains": ["retail", "tau2:retail"], "tau2": USER}, "domains", "share analysis"),
        (
            {"domains": ["tau2:retail"], "tau2": {"user": {"kind": "openai"}}},
            "tau2.user",
            "needs url and served_model",
        ),
        (
            {"domains": ["tau2:retail"], "tau2": {**USER, "max_step": 5}},
            "tau2.max_step",
            "unknown field",
        ),
    ],
)
def test_mistakes_are_one_line(extra: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(InputError) as info:
        _parse(**extra)
    assert info.value.field == field
    assert message in info.value.one_line()


def test_user_kinds_come_from_the_backend_registry() -> None:
    """The user simulator's kind is a registered backend, no `Literal`: a bad one is one
    line naming the file and field and listing the registry's names; a backend registered
    later is accepted, and what it takes decides what the user must give."""
    from flatscore.models.shared import BACKENDS, register_backend

    with pytest.raises(InputError) as info:
        _parse(domains=["tau2:retail"], tau2={"user": {"kind": "ggml"}})
    assert info.value.one_line() == (
        "s.yaml, field 'tau2.user.kind': unknown backend 'ggml' "
        "(known: embedded, gguf, local, openai)"
    )
    register_backend("remote", lambda spec: None, needs=["url", "served_model"])  # type: ignore[arg-type,return-value]
    try:
        with pytest.raises(InputError, match="a user of kind 'remote' needs url and served_model"):
            _parse(domains=["tau2:retail"], tau2={"user": {"kind": "remote"}})
        user = {"kind": "remote", "url": "http://x", "served_model": "m"}
        assert _parse(domains=["tau2:retail"], tau2={"user": user}).tau2.user.kind == "remote"
        # a study file of before the rename still reads: `model` is served_model's old name
        older = {"kind": "remote", "url": "http://x", "model": "m"}
        assert _parse(domains=["tau2:retail"], tau2={"user": older}).tau2.user.served_model == "m"
        with pytest.raises(InputError, match="url/served_model apply to kind openai/remote only"):
            _parse(domains=["tau2:retail"], tau2={"user": {"kind": "embedded", "url": "u"}})
    finally:
        BACKENDS.unregister("remote")


def test_trial_seeds_are_tau2s() -> None:
    """`tau2 run --seed 300 --num-trials 2` wrote these (tests/fixtures/tau2/v0.2/ok.json)."""
    assert tau2_seeds(300, 2) == [626729, 373753]
    assert tau2_seeds(300, 4)[:2] == [626729, 373753] and len(set(tau2_seeds(300, 4))) == 4


def test_without_the_extra_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from flatscore.run.driver import run_study
    from flatscore.run.tau2 import lib

    monkeypatch.setattr(lib, "tau2_version", lambda: None)
    study = _parse(domains=["tau2:retail"], tau2=USER, output=str(tmp_path))
    with pytest.raises(InputError, match=r"pip install 'flatscore\[tau2\]'"):
        run_study(study, progress=False, report=False)
