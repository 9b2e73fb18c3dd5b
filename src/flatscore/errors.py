"""One error type for bad input: the CLI turns it into one clear line and exit code 2.

`from_validation` is the one place a pydantic `ValidationError` becomes that line: its first
error, located by file, record and field path (`models.0.arms.int4.url`); `validating(...)`
wraps a block that validates, so callers do not each write the `try`/`except`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypedDict, Unpack

if TYPE_CHECKING:  # a type only: `flatscore --help` need not import pydantic
    from pydantic import ValidationError


FieldOf = Callable[[tuple[int | str, ...]], str | None]
"""The field to name for a validation error's location (e.g. a CLI flag)."""


class InputError(Exception):
    """Bad input, located precisely: which file, which record, which field."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        record: str | int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.record = record
        self.field = field
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = []
        if self.file is not None:
            where.append(str(self.file))
        if self.record is not None:
            where.append(f"record {self.record}")
        if self.field is not None:
            where.append(f"field '{self.field}'")
        prefix = ": ".join([", ".join(where)]) if where else ""
        text = " ".join(self.message.split())
        return f"{prefix}: {text}" if prefix else text


class RunFailed(Exception):
    """A run that produced nothing to analyse: every episode it ran ended in an
    infrastructure error (an endpoint down or refusing the requests). The CLI prints the
    one line and exits 1."""


def from_validation(
    exc: ValidationError,
    *,
    file: str | None = None,
    record: str | int | None = None,
    prefix: str = "",
    field: FieldOf | None = None,
    missing: str | None = None,
    extra: str | None = None,
) -> InputError:
    """The first error of `exc` as one `InputError`. The field is the error's location
    joined with dots (after `prefix`), or what `field(loc)` returns (e.g. a CLI flag);
    `missing` / `extra` replace pydantic's message for a missing / an unknown field."""
    first = exc.errors()[0]
    loc = tuple(first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "missing" and missing is not None:
        message = missing
    elif first["type"] == "extra_forbidden" and extra is not None:
        message = extra
    where = field(loc) if field is not None else prefix + ".".join(str(p) for p in loc)
    return InputError(message, file=file, record=record, field=where or None)


class Where(TypedDict, total=False):
    """`from_validation`'s keywords: where the error is and how to say it."""

    file: str | None
    record: str | int | None
    prefix: str
    field: FieldOf | None
    missing: str | None
    extra: str | None


@contextmanager
def validating(**where: Unpack[Where]) -> Iterator[None]:
    """Run the block; a pydantic `ValidationError` raised in it leaves as `from_validation`'s
    one `InputError` (same keywords), without the pydantic traceback behind it."""
    from pydantic import ValidationError  # here: importing errors must not import pydantic

    try:
        yield
    except ValidationError as exc:
        raise from_validation(exc, **where) from None
