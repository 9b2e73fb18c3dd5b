"""Loading a study file: YAML → the schema (`flatscore.study`) → the registry checks
(`flatscore.run.checks`), any mistake as one `InputError` naming the file and the field
(`models.0.arms.int4.url`). The reference is `docs/studies.md`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from flatscore.analysis.settings import POINTS
from flatscore.errors import InputError, validating
from flatscore.run.checks import check_study
from flatscore.study import Study


def parse_study(data: Any, *, file: str | None = None, base_dir: Path | None = None) -> Study:
    """Validate a study from already-parsed YAML/JSON data."""
    if not isinstance(data, dict):
        raise InputError("a study file must be a mapping (key: value)", file=file)
    with validating(
        file=file,
        field=lambda loc: ".".join(map(str, loc)) or "(study)",
        extra="unknown field (check the spelling; see docs/studies.md)",
    ):
        study = Study.model_validate(
            {**data, "base_dir": base_dir or Path(".")},
            context={**POINTS, "base_dir": base_dir or Path(".")},
        )
    return check_study(study, file)


def load_study(path: str | Path) -> Study:
    """Read and validate a study file (YAML); bad input raises one `InputError`."""
    path = Path(path)
    if not path.is_file():
        raise InputError("study file not found", file=str(path))
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise InputError(f"not valid YAML{where}: {problem}", file=str(path)) from None
    except UnicodeDecodeError:
        raise InputError("not a UTF-8 text file", file=str(path)) from None
    return parse_study(data, file=str(path), base_dir=path.parent)
