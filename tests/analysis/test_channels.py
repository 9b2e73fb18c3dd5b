"""Channel classification: the order of the tests, the bundled τ² rules, user rule files."""

from __future__ import annotations

from pathlib import Path

import pytest

from flatscore.analysis.channels import classify_failed_call, load_rules
from flatscore.episode import ToolCall, ToolResult
from flatscore.errors import InputError

RULES = load_rules()
AGENT = frozenset({"get_user", "cancel_order"})
USER = frozenset({"toggle_airplane_mode"})


def classify(name: str, text: str, kind: str | None = None, args: dict | str | None = None,
             domain: str = "retail", agent: frozenset[str] = AGENT) -> str:  # fmt: skip
    call = ToolCall(id="c", name=name, arguments={} if args is None else args)
    result = ToolResult(call_id="c", error=True, text=text, error_kind=kind)
    return classify_failed_call(
        call, result, domain=domain, agent_tools=agent, user_tools=USER, rules=RULES
    )


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("get_usr", "Error: Tool 'get_usr' not found.", "invented"),
        ("toggle_airplane_mode", "Error: Tool 'toggle_airplane_mode' not found.", "role_confusion"),
        (
            "get_user",
            "Error: MockTools.create_task() missing 1 required positional argument: 'title'",
            "bad_arguments",
        ),
        ("get_user", "Error: get_user() got an unexpected keyword argument 'id'", "bad_arguments"),
        ("get_user", "Error: 1 validation error for GetUser", "bad_arguments"),
        ("get_user", "Error: User not found", "entity_not_found"),
        ("get_user", "Error: order #W123 does not exist", "entity_not_found"),
        ("cancel_order", "Error: Non-pending order cannot be cancelled", "precondition"),
        ("cancel_order", "Error: insufficient gift card balance", "precondition"),
        ("cancel_order", "Error: something odd happened", "other"),
    ],
)
def test_tau2_error_texts(name: str, text: str, expected: str) -> None:
    assert classify(name, text) == expected


def test_name_test_beats_text() -> None:
    # Not an agent tool: unknown_tool whatever the text says.
    assert classify("toggle_airplane_mode", "Error: User not found") == "role_confusion"
    # Without tool lists only the text decides.
    assert classify("whatever", "Error: User not found", agent=frozenset()) == "entity_not_found"
    assert (
        classify("whatever", "Error: Tool 'whatever' not found.", agent=frozenset()) == "invented"
    )


def test_recorded_error_kind_wins() -> None:
    assert classify("get_user", "Error: Tool 'x' not found.", kind="precondition") == "precondition"
    assert classify("toggle_airplane_mode", "", kind="unknown_tool") == "role_confusion"
    assert classify("nope", "", kind="unknown_tool") == "invented"
    # An error_kind flatscore does not know falls through to the other tests.
    assert classify("get_user", "Error: User not found", kind="weird") == "entity_not_found"


def test_unparsed_arguments_are_bad_arguments() -> None:
    assert classify("get_user", "Error: something", args='{"user_id": ') == "bad_arguments"


def test_user_rules_file(tmp_path: Path) -> None:
    f = tmp_path / "rules.yaml"
    f.write_text(
        "defaults:\n  - {channel: precondition, pattern: 'nope'}\n"
        "domains:\n  airline:\n    - {channel: entity_not_found, pattern: 'nope'}\n"
    )
    rules = load_rules(f)
    assert rules.source == str(f)
    assert rules.match("retail", "Error: nope") == "precondition"
    assert rules.match("airline", "Error: NOPE") == "entity_not_found"
    assert rules.match("retail", "Error: Tool 'x' not found.") is None  # replaces the bundled rules


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("defaults: [{channel: teleport, pattern: x}]", "defaults.0.channel"),
        ("defaults: [{channel: other, pattern: '('}]", "not a valid regex"),
        ("- just a list", "expected a mapping"),
        ("defaults: [unclosed", "not valid YAML"),
    ],
)
def test_bad_rules_file(tmp_path: Path, content: str, message: str) -> None:
    f = tmp_path / "rules.yaml"
    f.write_text(content)
    with pytest.raises(InputError) as exc:
        load_rules(f)
    assert message in exc.value.one_line() and str(f) in exc.value.one_line()


def test_missing_rules_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        load_rules(tmp_path / "absent.yaml")


def test_unknown_name_beats_unparseable_arguments() -> None:
    """The name test comes before the argument test: an unknown tool with garbage arguments is
    a hallucinated name (invented / role_confusion), not bad_arguments."""
    assert classify("get_usr", "Error: something", args='{"user_id": ') == "invented"
    assert classify("toggle_airplane_mode", "Error: x", args="{oops") == "role_confusion"
