"""The README's search-speed table is the bench's (issue 33): ``bench/readme_figures.py --check``.

CI reruns the fast cases (GPT-3 175B, Mixtral 8x7B, the alternating model; about 15 s of CPU) on the
default target, native, and compares status, gap, step and candidates exactly and the times within
the noise band; the other targets and the slow cases are checked by running the bench itself
(``python bench/readme_figures.py --check``, a few minutes). The serving-fidelity block is
``bench/serving_fidelity.py``'s output, compared line by line (about 2 s of CPU), and so is the serve-plan
transcript (the CLI run in a fresh directory, about 3 s).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import readme_figures as rf  # noqa: E402


@pytest.fixture(scope="module")
def measured() -> dict:
    return rf.measure_all(list(rf.FAST_CASES), [rf.DEFAULT_TARGET])


def test_the_readme_search_table_matches_a_fresh_run(measured: dict) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert rf.differences(readme, measured) == []


def test_an_edited_readme_figure_is_found(measured: dict) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    label = rf.cases()[rf.FAST_CASES[0] - 1][0]
    row = rf.read_table(readme)[label]
    cell = row[rf.HEADER.index("native (default): result")]
    edited_cell = cell.replace("gap ", "gap 1", 1)  # 0.24% -> 10.24%: a figure the bench never printed
    edited = readme.replace("| " + " | ".join(row) + " |", "| " + " | ".join(row).replace(cell, edited_cell) + " |")
    assert edited != readme
    found = rf.differences(edited, measured)
    assert len(found) == 1 and label in found[0] and "README says" in found[0]


def test_a_time_beyond_the_noise_band_is_found(measured: dict) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    label = rf.cases()[rf.FAST_CASES[0] - 1][0]
    row = rf.read_table(readme)[label]
    slow = list(row)
    slow[rf.HEADER.index("CPU s")] = "99.00"
    edited = readme.replace("| " + " | ".join(row) + " |", "| " + " | ".join(slow) + " |")
    assert any("CPU s" in line for line in rf.differences(edited, measured))


def test_check_exits_1_on_an_edited_readme(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    label = rf.cases()[5][0]  # the alternating model: about a second
    row = rf.read_table(readme)[label]
    cell = row[rf.HEADER.index("native (default): result")]
    edited = tmp_path / "README.md"
    edited.write_text(readme.replace(cell, cell.replace("step ", "step 9", 1)), encoding="utf-8")
    assert rf.main(["readme_figures.py", "--check", "--tables", "search", "--cases", "6", "--targets", "native", "--readme", str(edited)]) == 1


def test_time_band() -> None:
    assert rf.time_ok(5.6, 2.7, "CPU s") and rf.time_ok(1.2, 2.7, "CPU s") and rf.time_ok(25.0, 2.7, "wall s")
    assert not rf.time_ok(30.0, 2.7, "CPU s") and not rf.time_ok(1.0, 20.0, "CPU s") and not rf.time_ok(60.0, 2.7, "wall s")


@pytest.fixture(scope="module")
def serving() -> str:
    return rf.serving_block()


def test_the_readme_serving_block_matches_a_fresh_run(serving: str) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert rf.serving_differences(readme, serving) == []


def test_an_edited_serving_figure_is_found(serving: str) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index(rf.SERVING_BEGIN):readme.index(rf.SERVING_END)]
    line = next(x for x in block.splitlines() if x.startswith("all rows"))
    edited = readme.replace(line, line.replace("%", "1%", 1))  # the median gains a digit the bench never printed
    assert edited != readme
    found = rf.serving_differences(edited, serving)
    assert len(found) == 1 and "all rows" in found[0]
    assert rf.serving_differences(readme.replace(rf.SERVING_BEGIN, ""), serving)  # no block: a difference, not a pass


@pytest.fixture(scope="module")
def transcript() -> str:
    return rf.transcript_block()


def test_the_readme_serve_plan_transcript_matches_a_fresh_run(transcript: str) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert rf.transcript_differences(readme, transcript) == []
    assert "(exit" not in transcript and "output tokens/s per GPU" in transcript


def test_an_edited_transcript_figure_is_found(transcript: str) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index(rf.TRANSCRIPT_BEGIN):readme.index(rf.TRANSCRIPT_END)]
    line = next(x for x in block.splitlines() if x.startswith("TPOT"))
    edited = readme.replace(line, line.replace(" ms", "1 ms", 1))  # a TPOT the CLI never printed
    assert edited != readme
    found = rf.transcript_differences(edited, transcript)
    assert len(found) == 1 and "TPOT" in found[0] and "serve-plan transcript" in found[0]
