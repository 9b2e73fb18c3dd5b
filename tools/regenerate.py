"""Regenerate the files the repository derives from code.

    python -m tools.regenerate [--check] [schema] [retail] [telecom]   # default: all

- `schema`: docs/analysis.schema.json, the JSON Schema of analysis.json, from its pydantic
  models (`flatscore.analysis.schema`).
- `retail`, `telecom`: the domain's shipped `db.json` and `tasks.json`, from its seeded
  generator (`flatscore.domains.<name>.generate`).

The tests fail when a committed file differs from a fresh generation
(tests/analysis/test_schema.py, tests/domains/test_generate.py); `--check` names the stale
files without writing (exit 1 if any).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _schema(folder: Path) -> list[Path]:
    from flatscore.analysis.schema import schema_text

    path = folder / "analysis.schema.json"
    path.write_text(schema_text(), encoding="utf-8")
    return [path]


def _domain(name: str) -> Callable[[Path], list[Path]]:
    def write(folder: Path) -> list[Path]:
        importlib.import_module(f"flatscore.domains.{name}.generate").write_data(folder)
        return [folder / "db.json", folder / "tasks.json"]

    return write


TARGETS: dict[str, tuple[str, Callable[[Path], list[Path]]]] = {
    "schema": ("docs", _schema),
    "retail": ("src/flatscore/domains/retail", _domain("retail")),
    "telecom": ("src/flatscore/domains/telecom", _domain("telecom")),
}
"""What can be regenerated: its folder in the repository and the function writing there."""


def regenerate(names: Sequence[str], root: Path = ROOT, check: bool = False) -> list[Path]:
    """Write each target's files under `root`; with `check`, write nothing and return the
    files that differ from a fresh generation (or are missing)."""
    changed = []
    for name in names:
        folder, write = TARGETS[name]
        with tempfile.TemporaryDirectory() as tmp:
            for fresh in write(Path(tmp)):
                path = root / folder / fresh.name
                text = fresh.read_text(encoding="utf-8")
                if path.exists() and path.read_text(encoding="utf-8") == text:
                    continue
                changed.append(path)
                if not check:
                    path.write_text(text, encoding="utf-8")
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.regenerate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("targets", nargs="*", metavar="TARGET", help=", ".join(TARGETS))
    parser.add_argument("--check", action="store_true", help="only name the stale files")
    args = parser.parse_args(argv)
    unknown = [t for t in args.targets if t not in TARGETS]
    if unknown:
        parser.error(f"unknown target {unknown[0]!r}; one of {', '.join(TARGETS)}")
    changed = regenerate(args.targets or list(TARGETS), check=args.check)
    for path in changed:
        print(f"{'stale' if args.check else 'wrote'} {path.relative_to(ROOT)}")
    if not changed:
        print("up to date")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
