"""The domain framework: schemas from signatures, argument validation, error kinds, hashing."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from flatscore.domains import get_domain
from flatscore.domains.framework import (
    NotFound,
    Precondition,
    ToolError,
    Toolkit,
    canonical_hash,
    format_result,
    setup,
    tool,
)


class Box(BaseModel):
    items: dict[str, int] = Field(default_factory=dict)


class BoxTools(Toolkit[Box]):
    @tool("read")
    def count(self, name: str) -> int:
        """How many of an item there are.

        Args:
            name: the item name
        """
        if name not in self.db.items:
            raise NotFound("Item", name)
        return self.db.items[name]

    @tool("write")
    def add(self, name: str, n: Annotated[int, Field(ge=1, le=5)] = 1) -> Box:
        """Add items."""
        self.db.items[name] = self.db.items.get(name, 0) + n
        return self.db

    @tool("write")
    def take(self, name: str, mode: Literal["one", "all"]) -> str:
        """Take items out."""
        if self.db.items.get(name, 0) == 0:
            raise Precondition(f"No {name} left.")
        self.db.items[name] = 0 if mode == "all" else self.db.items[name] - 1
        return "ok"

    @tool("read")
    def broken(self) -> str:
        """Always fails."""
        raise ToolError("something odd")

    @setup
    def fill(self, name: str) -> None:
        self.db.items[name] = 5

    def helper(self) -> None:
        """Not a tool."""


def test_schemas_are_openai_functions_in_definition_order() -> None:
    schemas = BoxTools.schemas()
    assert [s["function"]["name"] for s in schemas] == ["count", "add", "take", "broken"]
    count = schemas[0]
    assert count["type"] == "function"
    assert count["function"]["description"] == "How many of an item there are."
    params = count["function"]["parameters"]
    assert params == {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "the item name"}},
        "required": ["name"],
    }
    add = schemas[1]["function"]["parameters"]
    assert add["properties"]["n"] == {"type": "integer", "minimum": 1, "maximum": 5, "default": 1}
    assert add["required"] == ["name"]
    take = schemas[2]["function"]["parameters"]
    assert take["properties"]["mode"]["enum"] == ["one", "all"]
    assert "title" not in str(schemas)
    assert BoxTools.specs()["add"].kind == "write" and BoxTools.specs()["count"].kind == "read"


def test_schemas_and_databases_are_fresh_copies() -> None:
    """Both are built once per process (the schemas) or kept as text (the database): what one
    caller changes never reaches the next one."""
    first = BoxTools.schemas()
    first[0]["function"]["parameters"]["properties"].clear()
    first[0]["function"]["name"] = "changed"
    again = BoxTools.schemas()
    assert again[0]["function"]["name"] == "count"
    assert again[0]["function"]["parameters"]["properties"] == {
        "name": {"type": "string", "description": "the item name"}
    }
    retail = get_domain("retail")
    db = retail.load_db()
    before = canonical_hash(db)
    db.orders.clear()
    assert canonical_hash(retail.load_db()) == before != canonical_hash(db)


@pytest.mark.parametrize(
    ("name", "arguments", "kind", "text"),
    [
        ("nope", {}, "unknown_tool", "Tool 'nope' not found."),
        ("count", {}, "bad_arguments", "count() missing required argument 'name'."),
        (
            "count",
            {"name": "a", "x": 1},
            "bad_arguments",
            "count() got an unexpected argument 'x'.",
        ),
        ("count", '{"name": ', "bad_arguments", "count() arguments are not a valid JSON object."),
        ("add", {"name": "a", "n": 9}, "bad_arguments", "invalid value for argument 'n'"),
        ("take", {"name": "a", "mode": "some"}, "bad_arguments", "argument 'mode'"),
        ("count", {"name": "zz"}, "entity_not_found", "Item 'zz' not found."),
        ("take", {"name": "zz", "mode": "one"}, "precondition", "No zz left."),
        ("broken", {}, "other", "something odd"),
    ],
)
def test_call_errors_have_kind_and_name_the_culprit(
    name: str, arguments: dict[str, object] | str, kind: str, text: str
) -> None:
    kit = BoxTools(Box())
    with pytest.raises(ToolError) as info:
        kit.call(name, arguments)
    assert info.value.kind == kind
    assert text in info.value.text


def test_calls_validate_and_return_text() -> None:
    kit = BoxTools(Box())
    assert kit.call("add", {"name": "a", "n": 2}) == '{"items": {"a": 2}}'
    assert kit.call("count", {"name": "a"}) == "2"
    assert kit.call("take", {"name": "a", "mode": "all"}) == "ok"


def test_setup_actions_may_use_setup_methods_but_not_helpers() -> None:
    kit = BoxTools(Box())
    kit.run_setup("fill", {"name": "a"})
    assert kit.db.items == {"a": 5}
    with pytest.raises(ValueError, match="no setup action 'helper'"):
        kit.run_setup("helper", {})
    assert "fill" not in BoxTools.tool_names()


def test_canonical_hash_ignores_key_order_but_not_content() -> None:
    a = Box(items={"x": 1, "y": 2})
    b = Box(items={"y": 2, "x": 1})
    assert canonical_hash(a) == canonical_hash(b)
    assert canonical_hash(a) != canonical_hash(Box(items={"x": 1, "y": 3}))


def test_format_result() -> None:
    assert format_result("plain") == "plain"
    assert format_result([Box(items={"a": 1})]) == '[{"items": {"a": 1}}]'
    assert format_result({"k": 1.5}) == '{"k": 1.5}'
