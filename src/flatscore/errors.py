"""One error type for bad input: the CLI turns it into one clear line and exit code 2."""

from __future__ import annotations


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
