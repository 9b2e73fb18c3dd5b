"""Old spellings of options, accepted for one more release with a warning on stderr.

Each command declares the old name beside the new one (so it parses) and says so in its help;
`warn` names every old spelling a command line used. `gate --json` was a flag (JSON on
stdout) and is now a path like every command's `--json`: a bare `--json` (last, or before
another option) is read as `--json -`, stdout."""

from __future__ import annotations

_TRIAL_RANGE = {"--trials": "--trial-range"}
RENAMED: dict[str, dict[str, str]] = {
    # `--reference` is the reference arm everywhere (docs/gate.md says why gate's too)
    "gate": {
        "--margin": "--tost-margin",
        "--reference-arm": "--reference",
        "--candidate-arm": "--candidate",
    },
    "run": {"--counted": "--count"},
    "power": {"--K": "--tight-budget"},
    # `--trials` is a count where a command runs episodes (run, power); a range was renamed
    "analyze": _TRIAL_RANGE,
    "report": _TRIAL_RANGE,
    "export": _TRIAL_RANGE,
    "embedded-round": {**_TRIAL_RANGE, "--arm": "--reference"},
    # margins' reference is a precision its logits come from, not an arm of the runs
    "margins": {"--reference": "--reference-logits"},
    # `--study` is a study's name where a command writes episodes (run, import)
    "archive": {"--study": "--study-file"},
}
"""command → old option → its name now."""

NOTE = "deprecated spelling, accepted until the next release"


def deprecated(old: str) -> str:
    """The help's words for an old spelling (`(--margin: deprecated spelling, …)`)."""
    return f"({old}: {NOTE})"


def _command(argv: list[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def rewrite(argv: list[str]) -> tuple[list[str], list[str]]:
    """The arguments as today's spellings parse them, and one warning per old spelling."""
    command = _command(argv)
    warnings = []
    out = list(argv)
    for old, new in RENAMED.get(command or "", {}).items():
        if any(a == old or a.startswith(old + "=") for a in out):
            warnings.append(f"{old} is now {new} ({NOTE})")
    if command == "gate":
        for i, a in enumerate(out):
            if a == "--json" and (i + 1 == len(out) or out[i + 1].startswith("--")):
                out.insert(i + 1, "-")
                warnings.append(f"a bare --json is now --json - (JSON on stdout; {NOTE})")
                break
    return out, warnings
