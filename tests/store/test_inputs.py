"""The streaming depth guard: exact JSON nesting depth over any chunking (property test),
and the file-kind checks."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flatscore.errors import InputError
from flatscore.store.inputs import (
    DepthGuard,
    TooDeep,
    check_regular_file,
    json_array,
    parse_json_bytes,
)

tricky = st.text(alphabet='ab[]{}"\\\n/é', max_size=12)
values = st.recursive(
    st.none() | st.integers() | tricky,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(tricky, inner, max_size=3),
    max_leaves=12,
)


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    return 0


def fed(text: bytes, chunk: int, limit: int) -> DepthGuard:
    guard = DepthGuard(limit)
    for i in range(0, len(text), chunk):
        guard.feed(text[i : i + chunk])
    return guard


@settings(max_examples=100, deadline=None)
@given(values, st.integers(1, 9), st.booleans())
def test_the_guard_measures_depth_exactly_over_any_chunking(
    value: Any, chunk: int, ascii_only: bool
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")
    d = depth(value)
    guard = fed(text, chunk, limit=d)
    assert guard.depth == 0 and not guard.in_string and not guard.escape_pending
    if d > 0:
        with pytest.raises(TooDeep):
            fed(text, chunk, limit=d - 1)


def test_parse_refuses_deep_and_huge() -> None:
    with pytest.raises(TooDeep):
        parse_json_bytes(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(ValueError):
        parse_json_bytes(b"1" + b"0" * 5000)
    assert parse_json_bytes(b'{"a": [[1]]}') == {"a": [[1]]}


def test_only_regular_files_pass(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    check_regular_file(tmp_path / "f")
    os.mkfifo(tmp_path / "p")
    refused = [
        (tmp_path, "directory"),
        (tmp_path / "p", "FIFO"),
        (Path("/dev/null"), "device"),
        (tmp_path / "nope", "not found"),
    ]
    for path, what in refused:
        with pytest.raises(InputError, match=what):
            check_regular_file(path)


def _label(index: int) -> str:
    return f"item {index}"


@pytest.mark.parametrize(
    ("text", "required", "items"),
    [
        ('{"a": 1, "xs": [1, {"b": 2}, "c"]}', False, [1, {"b": 2}, "c"]),
        ('{"xs": []}', True, []),
        ('{"a": 1}', False, []),  # missing and not required: no items
        ('{"xs": null}', False, []),
    ],
)
def test_json_array_streams_the_items(
    tmp_path: Path, text: str, required: bool, items: list[Any]
) -> None:
    path = tmp_path / "f.json"
    path.write_text(text)
    assert list(json_array(path, "xs", _label, required=required)) == items


@pytest.mark.parametrize(
    ("text", "required", "record", "field", "words"),
    [
        ('{"xs": [1, 2, {"b": ', False, "item 2", None, "invalid or truncated JSON"),
        ('{"xs": [1, 2] x', False, "item 2", None, "invalid or truncated JSON"),
        ('{"a": 1}', True, None, "xs", "missing field"),
        ('{"xs": {"b": 1}}', False, None, "xs", "must be a list"),
        ('{"xs": 3}', True, None, "xs", "must be a list"),
        ('{"xs": ' + "[" * 200 + "]" * 200 + "}", False, None, None, "nested"),
    ],
)
def test_json_array_bad_input_is_one_input_error(
    tmp_path: Path, text: str, required: bool, record: str | None, field: str | None, words: str
) -> None:
    path = tmp_path / "f.json"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        list(json_array(path, "xs", _label, required=required))
    err = info.value
    assert (err.file, err.record, err.field) == (str(path), record, field)
    assert words in err.message
