"""Where a report's files were written (its own module, so the terminal can name it without
importing the package that writes them)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict


class ReportPaths(BaseModel):
    """Where the report's files were written."""

    model_config = ConfigDict(frozen=True)

    html: Path
    summary: Path
    analysis: Path
    tables: Path
