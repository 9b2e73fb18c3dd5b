"""`validating`: a pydantic error raised in the block leaves as `from_validation`'s one line."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from flatscore.errors import InputError, validating


class _Point(BaseModel):
    x: int = Field(ge=0)


def test_a_validation_error_becomes_one_input_error_naming_file_record_and_field() -> None:
    with pytest.raises(InputError) as caught, validating(file="p.json", record=3, prefix="p."):
        _Point.model_validate({"x": -1})
    assert str(caught.value) == (
        "p.json, record 3, field 'p.x': Input should be greater than or equal to 0"
    )
    assert caught.value.__suppress_context__  # no pydantic traceback behind the line


def test_field_and_missing_say_it_as_the_caller_asks() -> None:
    with (
        pytest.raises(InputError) as caught,
        validating(field=lambda loc: f"--{loc[0]}", missing="is required"),
    ):
        _Point.model_validate({})
    assert str(caught.value) == "field '--x': is required"


def test_other_errors_and_success_pass_through() -> None:
    with validating():
        point = _Point.model_validate({"x": 2})
    assert point.x == 2
    with pytest.raises(KeyError), validating():
        raise KeyError("x")
