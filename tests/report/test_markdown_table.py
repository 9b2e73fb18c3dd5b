"""The one Markdown table builder: known answers and the alignment letters."""

import pytest

from flatscore.report.markdown_table import row, table_lines


def test_a_table_has_header_alignment_and_rows() -> None:
    assert table_lines(["arm", "n", "p"], [["ref", 3, "0.5"], ["int8", 12, "—"]], "lr") == [
        "| arm | n | p |",
        "|---|---:|---:|",
        "| ref | 3 | 0.5 |",
        "| int8 | 12 | — |",
    ]


def test_each_letter_and_the_last_one_standing_for_the_rest() -> None:
    assert table_lines(list("abcdef"), [], "lrcL")[1] == "|---|---:|:---:|:---|:---|:---|"
    assert table_lines(["a", "b"], [], "lrrr")[1] == "|---|---:|"  # extra letters ignored


@pytest.mark.parametrize("align", ["", "x", "lrz"])
def test_an_unknown_alignment_is_refused(align: str) -> None:
    with pytest.raises(ValueError, match="align"):
        table_lines(["a"], [], align)


def test_a_row_prints_any_value() -> None:
    assert row([1, None, 2.5, "x"]) == "| 1 | None | 2.5 | x |"
