"""The step of the repository's GitHub Action (`action.yml`): run `flatscore gate` on the
runs its inputs name, write the verdict table to the job summary and set the step outputs.

`python -m flatscore.cli.github_action`, configured as GitHub configures an action's step:
inputs in `INPUT_<NAME>` variables (`INPUT_REFERENCE`, `INPUT_CANDIDATE`, ...: action.yml
passes them through `env`, never into the shell text), the summary appended to the file
`$GITHUB_STEP_SUMMARY` and outputs to `$GITHUB_OUTPUT`. So a test runs the very step with
temporary files for both. The gate itself runs as its own process (`flatscore gate --json`),
exactly what a workflow calling it by hand would get.

Exit code: the gate's (0 pass, 3 damage, 4 inconclusive; 2 bad input, 1 a file-system
error), except that an inconclusive verdict exits 0 with a warning when
`fail-on-inconclusive` is false.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flatscore.analysis.settings import in_points
from flatscore.defaults import TIGHT_K, TOST_MARGIN
from flatscore.report.markdown_table import table_lines

GATE = [sys.executable, "-m", "flatscore.cli", "gate"]
TRUE, FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off", "")


class ActionError(Exception):
    """Bad input to the action: one `::error::` line, exit code 2."""


@dataclass(frozen=True)
class Inputs:
    reference: str
    candidate: str
    reference_arm: str | None
    candidate_arm: str | None
    margin: str
    tight_budget: str
    default_budget: str | None
    channels: str | None
    sequential: bool
    fail_on_inconclusive: bool
    json_path: Path


def _flag(env: dict[str, str], name: str, default: bool) -> bool:
    raw = env.get(f"INPUT_{name}", "").strip().lower()
    if not raw:
        return default
    if raw in TRUE:
        return True
    if raw in FALSE:
        return False
    raise ActionError(
        f"input {name.lower().replace('_', '-')}: expected true or false, got {raw!r}"
    )


def read_inputs(env: dict[str, str]) -> Inputs:
    """The action's inputs from `INPUT_*` variables (empty means not given)."""

    def get(name: str) -> str | None:
        value = env.get(f"INPUT_{name}", "").strip()
        return value or None

    reference, candidate = get("REFERENCE"), get("CANDIDATE")
    if reference is None or candidate is None:
        raise ActionError("inputs reference and candidate are required (paths or globs)")
    return Inputs(
        reference=reference,
        candidate=candidate,
        reference_arm=get("REFERENCE_ARM"),
        candidate_arm=get("CANDIDATE_ARM"),
        margin=get("MARGIN") or f"{in_points(TOST_MARGIN):g}",
        tight_budget=get("TIGHT_BUDGET") or str(TIGHT_K),
        default_budget=get("DEFAULT_BUDGET"),
        channels=get("CHANNELS"),
        sequential=_flag(env, "SEQUENTIAL", False),
        fail_on_inconclusive=_flag(env, "FAIL_ON_INCONCLUSIVE", True),
        json_path=Path(get("JSON") or "flatscore-gate.json"),
    )


def expand(pattern: str, role: str, scratch: Path) -> Path:
    """One path for the gate: the path a glob matches, or a folder of links to every file it
    matches (whitespace separates several globs)."""
    matches: list[str] = []
    for part in pattern.split():
        matches.extend(sorted(glob.glob(part, recursive=True)))
    matches = list(dict.fromkeys(matches))
    if not matches:
        raise ActionError(f"input {role}: {pattern!r} matches no file or folder")
    if len(matches) == 1:
        return Path(matches[0])
    folder = scratch / role
    folder.mkdir()
    for i, match in enumerate(matches):
        path = Path(match).resolve()
        if path.is_dir():
            raise ActionError(f"input {role}: {pattern!r} matches a folder among several paths")
        (folder / f"{i:04d}-{path.name}").symlink_to(path)
    return folder


def has_sequential() -> bool:
    """Whether this flatscore's gate takes `--sequential`."""
    done = subprocess.run([*GATE, "--help"], capture_output=True, text=True, timeout=120)
    return "--sequential" in done.stdout


def gate_command(inputs: Inputs, reference: Path, candidate: Path) -> list[str]:
    cmd = [*GATE, str(reference), str(candidate), "--json", "-"]
    cmd += ["--tost-margin", inputs.margin, "--tight-budget", inputs.tight_budget]
    for flag, value in (
        ("--reference", inputs.reference_arm),
        ("--candidate", inputs.candidate_arm),
        ("--default-budget", inputs.default_budget),
        ("--channels", inputs.channels),
    ):
        if value is not None:
            cmd += [flag, value]
    if inputs.sequential:
        if not has_sequential():
            raise ActionError(
                "input sequential: this flatscore's gate has no --sequential yet; set "
                "sequential: false (or use a flatscore whose `flatscore gate --help` lists it)"
            )
        cmd.append("--sequential")
    return cmd


def _pts(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f}"


def _budget(b: dict[str, Any]) -> str:
    """A budget's gap (reference − candidate, points) with its interval and what it says."""
    text = f"{_pts(b.get('gap'))} [{_pts(b.get('ci_low'))}, {_pts(b.get('ci_high'))}]"
    if b.get("significant") and (b.get("gap") or 0) > 0:
        text += " drop"
    if b.get("equivalent"):
        text += " ≈"
    return text


def summary_markdown(result: dict[str, Any]) -> str:
    """The job summary: the verdict, one table line per compared cell, the paragraph."""
    cells = result.get("cells", [])
    ks = [b["K"] for b in cells[0]["budgets"]] if cells else []
    header = [
        "model",
        "domain",
        "candidate vs reference",
        "tasks",
        "gate",
        "analysis",
        *(f"gap at K={k} (points) [95% CI]" for k in ks),
        "amplified channels",
    ]
    rows = [
        [
            c["model"],
            c["domain"],
            f"{c['candidate']} vs {c['reference']}",
            c["paired_tasks"],
            f"**{c['verdict']}**",
            c.get("analysis_verdict") or "—",
            *(_budget(b) for b in c["budgets"]),
            ", ".join(c["amplified_channels"]) or "none",
        ]
        for c in cells
    ]
    options = result.get("options", {})
    lines = [
        f"## flatscore gate: {result['verdict'].upper()} (exit {result['exit_code']})",
        "",
        *table_lines(header, rows, "llllll" + "r" * len(ks) + "l"),
        "",
        "Gap: reference minus candidate success, paired on tasks; `drop` a significant drop, "
        "`≈` equivalent within "
        f"±{in_points(float(options.get('tost_margin', TOST_MARGIN))):.1f} points (TOST).",
        "",
        result.get("summary", ""),
    ]
    lines += [f"- warning: {w}" for w in result.get("warnings", [])]
    return "\n".join(lines) + "\n"


def decided(result: dict[str, Any]) -> list[dict[str, str]]:
    """The comparisons the gate decided (pass or damage), for later steps."""
    return [
        {
            "model": c["model"],
            "domain": c["domain"],
            "reference": c["reference"],
            "candidate": c["candidate"],
            "verdict": c["verdict"],
        }
        for c in result.get("cells", [])
        if c["verdict"] in ("pass", "damage")
    ]


def write_outputs(path: str | None, outputs: dict[str, str]) -> None:
    """Append `name=value` (a multi-line value in a heredoc) to `$GITHUB_OUTPUT`."""
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        for name, value in outputs.items():
            if "\n" in value:
                mark = f"EOF_{uuid.uuid4().hex}"
                f.write(f"{name}<<{mark}\n{value}\n{mark}\n")
            else:
                f.write(f"{name}={value}\n")


def append_summary(path: str | None, text: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)


def run(env: dict[str, str]) -> int:
    """The step: its exit code."""
    summary_file, output_file = env.get("GITHUB_STEP_SUMMARY"), env.get("GITHUB_OUTPUT")
    try:
        inputs = read_inputs(env)
        with tempfile.TemporaryDirectory(prefix="flatscore-gate-") as scratch:
            reference = expand(inputs.reference, "reference", Path(scratch))
            candidate = expand(inputs.candidate, "candidate", Path(scratch))
            cmd = gate_command(inputs, reference, candidate)
            print("+ flatscore " + " ".join(cmd[3:]), flush=True)
            done = subprocess.run(cmd, capture_output=True, text=True)
    except ActionError as exc:
        print(f"::error::{exc}", flush=True)
        append_summary(summary_file, f"## flatscore gate: ERROR\n\n{exc}\n")
        write_outputs(output_file, {"verdict": "error", "exit-code": "2", "decided": "[]"})
        return 2
    sys.stderr.write(done.stderr)
    if done.returncode not in (0, 3, 4):
        line = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no message"
        print(f"::error::flatscore gate exited {done.returncode}: {line}", flush=True)
        append_summary(summary_file, f"## flatscore gate: ERROR\n\n{line}\n")
        code = str(done.returncode)
        write_outputs(output_file, {"verdict": "error", "exit-code": code, "decided": "[]"})
        return done.returncode
    result = json.loads(done.stdout)
    inputs.json_path.write_text(done.stdout, encoding="utf-8")
    print(result["summary"], flush=True)
    append_summary(summary_file, summary_markdown(result))
    write_outputs(
        output_file,
        {
            "verdict": result["verdict"],
            "exit-code": str(result["exit_code"]),
            "decided": json.dumps(decided(result)),
            "summary": result["summary"],
            "json": str(inputs.json_path.resolve()),
        },
    )
    if result["verdict"] == "inconclusive" and not inputs.fail_on_inconclusive:
        print(f"::warning::flatscore gate inconclusive: {result['summary']}", flush=True)
        return 0
    return int(result["exit_code"])


if __name__ == "__main__":
    sys.exit(run(dict(os.environ)))
