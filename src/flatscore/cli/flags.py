"""Analysis settings and their command-line flags. The analysis names a setting by its field
(`trials`, `tost_margin`); the command line says the flag (`--trial-range`, `--tost-margin`)
in its messages."""

from __future__ import annotations

from flatscore.errors import InputError

__all__ = ["RENAMED", "flag_of", "flagged"]

RENAMED: dict[str, str] = {"trials": "--trial-range"}
"""Analysis settings whose flag is not their name in dashes. The analysis names a setting by
its field (`trials`, `budgets`); the command line says the flag."""


def flag_of(setting: str) -> str:
    """The command-line flag of an analysis setting ('tost_margin' → '--tost-margin')."""
    return RENAMED.get(setting, "--" + setting.replace("_", "-"))


def flagged(exc: InputError, every: bool = False) -> InputError:
    """`exc` naming the flag where it names a setting: with `every`, any field (the error
    came from settings built from flags); otherwise only a renamed setting (`trials`, which
    the analysis names while it picks the trials read). An error that names a file names the
    file's own field (a study file's `trials` is a count, not the flag)."""
    field = exc.field
    if field is None or field.startswith("-") or exc.file is not None:
        return exc
    if not (every or field in RENAMED):
        return exc
    return InputError(exc.message, file=exc.file, record=exc.record, field=flag_of(field))
