"""Reports rendered through the real pipeline (episodes → analysis → report), shared by the
report tests. A small bootstrap keeps them fast; the numbers are not what is tested here."""

from __future__ import annotations

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


def _report(
    tmp_path_factory: pytest.TempPathFactory, name: str, episodes: list[Episode]
) -> ReportPaths:
    return write_report(analyzed(episodes), episodes, tmp_path_factory.mktemp(name))


@pytest.fixture(scope="session")
def study_report(
    tmp_path_factory: pytest.TempPathFactory, study_episodes: list[Episode]
) -> ReportPaths:
    return _report(tmp_path_factory, "report", study_episodes)


@pytest.fixture(scope="session")
def hostile_report(
    tmp_path_factory: pytest.TempPathFactory, hostile_episodes: list[Episode]
) -> ReportPaths:
    return _report(tmp_path_factory, "hostile", hostile_episodes)


@pytest.fixture(scope="session")
def packed_hostile_report(
    tmp_path_factory: pytest.TempPathFactory, hostile_episodes: list[Episode]
) -> ReportPaths:
    """The hostile report with its transcripts gzip-packed, as a large study's would be."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("flatscore.report.html.COMPRESS_ABOVE", 0)
        return _report(tmp_path_factory, "hostile-packed", hostile_episodes)
