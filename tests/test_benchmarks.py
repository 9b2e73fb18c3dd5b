"""The benchmarks package: every module is listed and answers `--help` without loading a
model; the harness's pieces give known answers; one cheap benchmark runs end to end and
writes its table."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from benchmarks import harness
from benchmarks.harness import BENCHMARKS, Table, alternate, main, ratio

PACKAGE = Path(harness.__file__).parent
NOT_BENCHMARKS = {"__init__", "__main__", "harness"}


def test_every_module_is_listed_and_every_listed_name_is_a_module() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py")} - NOT_BENCHMARKS
    assert modules == {harness.module_name(n) for n in BENCHMARKS}


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_each_benchmark_imports_and_its_summary_is_its_docstring(name: str) -> None:
    module = importlib.import_module(f"benchmarks.{harness.module_name(name)}")
    assert callable(module.add_arguments) and callable(module.run)
    assert (module.__doc__ or "").splitlines()[0] == BENCHMARKS[name]


def test_list_names_every_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(BENCHMARKS)


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_help_of_each_benchmark(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([name, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: python -m benchmarks {name}")
    assert BENCHMARKS[name] in out and "--table FILE" in out


def test_an_unknown_name_exits_2_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["no-such-bench"]) == 2
    assert "no benchmark 'no-such-bench'" in capsys.readouterr().err


def test_underscored_names_are_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["analysis_speed", "--help"])
    assert "usage: python -m benchmarks analysis-speed" in capsys.readouterr().out


def test_table_markdown_known_answer() -> None:
    table = Table(["a", "b"], [["x", 1.5]], "lr", title="T", notes=["n1", "n2"])
    assert table.markdown() == "T\n\n| a | b |\n|---|---:|\n| x | 1.5 |\n\nn1\n\nn2"


def test_alternate_reverses_every_other_round() -> None:
    calls: list[str] = []

    def setting(name: str) -> object:
        return lambda: calls.append(name) or len(calls)

    out = alternate({"a": setting("a"), "b": setting("b")}, 3)
    assert calls == ["a", "b", "b", "a", "a", "b"]
    assert out == {"a": [1, 4, 5], "b": [2, 3, 6]}
    calls.clear()
    alternate({"a": setting("a"), "b": setting("b")}, 2, reverse=False)
    assert calls == ["a", "b", "a", "b"]


def test_the_shown_command_leaves_the_table_option_out() -> None:
    argv = ["--table", "a.md", "--rounds", "2", "--table=b.md", "7"]
    assert harness.without_table(argv) == ["--rounds", "2", "7"]


def test_ratio() -> None:
    assert ratio(3.0, 2.0) == "1.50×"
    assert ratio(1.0, 0.0) == "-"


def test_a_cheap_benchmark_runs_and_writes_its_table(tmp_path: Path) -> None:
    out = tmp_path / "table.md"
    argv = ["--cells", "1", "--bootstrap", "100", "--table", str(out)]
    (table,) = harness.run("analysis-speed", argv)
    assert table.header[0] == "step" and len(table.rows) == 5
    text = out.read_text(encoding="utf-8")
    assert text.startswith("`python -m benchmarks analysis-speed --cells 1 --bootstrap 100`\n")
    assert "Measured on " in text and table.markdown() in text


def test_peer_comparison_without_the_peers_stops_at_once_saying_how_to_make_them(
    tmp_path: Path,
) -> None:
    """No peers' environment: one message with the setup, before any study is read."""
    for argv in ([], ["--peers-python", str(tmp_path / "no-python")], ["--peers-python", "false"]):
        with pytest.raises(SystemExit) as stop:
            harness.run("peer-comparison", argv)
        assert "pip install -r benchmarks/peers/requirements.txt" in str(stop.value.code)
