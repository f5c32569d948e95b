"""bench/serving_speed.py: a bad repeat count is refused with exit 2, not a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import serving_speed as bench  # noqa: E402


@pytest.mark.parametrize("word", ["x", "0", "--nope"])
def test_bad_repeats_exit_2(word: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        bench.main(["serving_speed.py", word])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err
