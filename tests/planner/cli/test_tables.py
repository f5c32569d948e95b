"""Plain and terminal tables of ``planner/cli/_tables.py``."""

from __future__ import annotations

from planner.cli import _tables
from planner.cli._tables import plain_table, print_table


def test_plain_table_pads_columns_without_trailing_blanks() -> None:
    text = plain_table(["name", "gpus"], [["dgx-a100", "8"], ["x", "16"]])
    assert text == "name      gpus\ndgx-a100  8\nx         16\n"


def test_print_table_is_plain_when_piped(capsys) -> None:
    print_table("title", ["a", "b"], [["1", "2"]])
    assert capsys.readouterr().out == "a  b\n1  2\n"


def test_print_table_draws_rich_table_on_a_terminal(capsys, monkeypatch) -> None:
    monkeypatch.setattr(_tables.sys.stdout, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "100")
    print_table("presets", ["name", "description"], [["gpt3-175b", "GPT-3 175B"]])
    out = capsys.readouterr().out
    assert "presets" in out.splitlines()[0]
    assert "─" in out  # rich's header rule
    assert "gpt3-175b" in out and "GPT-3 175B" in out


def test_terminal_too_narrow_leaves_out_the_free_text_column(capsys, monkeypatch) -> None:
    monkeypatch.setattr(_tables.sys.stdout, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "30")
    print_table("presets", ["name", "size", "description"], [["gpt3-175b", "175B", "GPT-3 " * 10]])
    out = capsys.readouterr().out
    assert "gpt3-175b" in out and "175B" in out
    assert "description" not in out and "GPT-3" not in out
