"""Reports rendered through the real pipeline (episodes → analysis → report), shared by the
report tests. A small bootstrap keeps them fast; the numbers are not what is tested here."""

from __future__ import annotations

from pathlib import Path

import pytest

# The fixture builders next to this file are importable here and in the test modules:
# pytest's default import mode puts a test's (and a conftest's) own folder on sys.path.
from report_episodes import analyzed, hostile_study, study

from flatscore.episode import Episode
from flatscore.report import ReportPaths, write_report


@pytest.fixture(scope="session")
def study_episodes() -> list[Episode]:
    return study()


@pytest.fixture(scope="session")
def hostile_episodes() -> list[Episode]:
    return hostile_study()


@pytest.fixture(scope="session")
def study_report(
    tmp_path_factory: pytest.TempPathFactory, study_episodes: list[Episode]
) -> ReportPaths:
    out: Path = tmp_path_factory.mktemp("report")
    return write_report(analyzed(study_episodes), study_episodes, out)


@pytest.fixture(scope="session")
def hostile_report(
    tmp_path_factory: pytest.TempPathFactory, hostile_episodes: list[Episode]
) -> ReportPaths:
    out: Path = tmp_path_factory.mktemp("hostile")
    return write_report(analyzed(hostile_episodes), hostile_episodes, out)


@pytest.fixture(scope="session")
def packed_hostile_report(
    tmp_path_factory: pytest.TempPathFactory, hostile_episodes: list[Episode]
) -> ReportPaths:
    """The hostile report with its transcripts gzip-packed, as a large study's would be."""
    out: Path = tmp_path_factory.mktemp("hostile-packed")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("flatscore.report.html.COMPRESS_ABOVE", 0)
        return write_report(analyzed(hostile_episodes), hostile_episodes, out)
