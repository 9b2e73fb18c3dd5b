"""Settings named by field in the analysis, by flag on the command line (`cli.flags`)."""

from __future__ import annotations

from flatscore.cli.flags import flag_of, flagged
from flatscore.errors import InputError


def test_flag_of_dashes_the_field_unless_renamed() -> None:
    assert flag_of("tost_margin") == "--tost-margin"
    assert flag_of("trials") == "--trial-range"


def test_flagged_names_only_a_renamed_setting_outside_the_settings() -> None:
    """An error raised while reading episodes names `trials` (the flag is --trial-range);
    any other field (a gate's positional `reference`) is left as it is."""
    assert flagged(InputError("no episode", field="trials")).field == "--trial-range"
    assert flagged(InputError("no arm", field="reference")).field == "reference"
    assert flagged(InputError("bad", field="--channels")).field == "--channels"
    assert flagged(InputError("bad", field="seed"), every=True).field == "--seed"


def test_an_error_in_a_file_keeps_the_files_field() -> None:
    """A study file's `trials` is its count of trials per task, not `--trial-range`."""
    from pathlib import Path

    bad = InputError("must be ≥ 1", file=Path("s.yaml"), field="trials")
    assert flagged(bad).field == "trials"
    assert flagged(bad, every=True).field == "trials"
