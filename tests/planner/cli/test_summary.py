"""The readable estimate summary of ``planner/cli/_summary.py``, on a hand-written result dict."""

from __future__ import annotations

import io

from rich.console import Console

from planner.cli._summary import config_line, format_seconds, memory_verdict, summary_renderables


def _result(fits: bool) -> dict:
    """A result dict with the keys of ``EstimateResult.model_dump()`` (DESIGN.md contract)."""
    return {
        "step_time_s": 12.5,
        "tokens_per_s": 251658.24,
        "mfu": 0.4321,
        "model_tflops_per_gpu": 134.8,
        "peak_memory_gib": 70.0 if fits else 83.25,
        "memory_capacity_gib": 80.0,
        "fits": fits,
        "over_by_gib": 0.0 if fits else 3.25,
        "time_breakdown_s": {
            "compute": 10.0,
            "exposed_comm": 0.5,
            "pipeline_bubble": 1.5,
            "recompute": 0.0,
            "optimizer": 0.5,
        },
        "link_time_s": {"tp": 2.0, "cp": 0.0, "ep": 0.0, "pp": 0.25, "dp": 1.0},
        "memory_breakdown_gib": {
            "params": 10.0,
            "grads": 20.0,
            "optimizer_states": 15.0,
            "activations": 20.0,
            "buffers": 5.0,
        },
        "config": {"dp": 8, "tp": 8, "pp": 16, "sp": True, "recompute": "none", "stage_layers": [6, 6]},
        "assumptions": ["causal attention FLOPs counted once", "micro-batch 1"],
    }


def _render(result: dict) -> str:
    out = io.StringIO()
    console = Console(file=out, width=120, color_system=None)
    for part in summary_renderables(result):
        console.print(part)
    return out.getvalue()


def test_summary_shows_headline_breakdowns_and_assumptions() -> None:
    text = _render(_result(fits=True))
    for expected in (
        "dp 8 x tp 8 x pp 16, sp on, recompute none",
        "12.5 s",
        "251,658",
        "43.2 %",
        "134.8",
        "70.00 of 80.00 GiB, fits",
        "pipeline bubble",
        "12.0 %",  # 1.5 s of a 12.5 s step
        "tp link time",
        "total link time",
        "exposed (not hidden by compute)",
        "optimizer states",
        "- causal attention FLOPs counted once",
    ):
        assert expected in text, expected


def test_summary_says_by_how_much_it_does_not_fit() -> None:
    text = _render(_result(fits=False))
    assert "83.25 of 80.00 GiB, does not fit: over by 3.25 GiB" in text


def test_memory_verdict() -> None:
    assert memory_verdict({"fits": True, "over_by_gib": 0.0}) == "fits"
    assert memory_verdict({"fits": False, "over_by_gib": 1.234}) == "does not fit: over by 1.23 GiB"


def test_format_seconds_picks_a_unit() -> None:
    assert format_seconds(123.4) == "123 s"
    assert format_seconds(12.34) == "12.3 s"
    assert format_seconds(0.01234) == "12.3 ms"
    assert format_seconds(2.5e-5) == "25 us"
    assert format_seconds(0.0) == "0"


def test_config_line_shows_mesh_and_batch_settings() -> None:
    config = {"tp": 2, "dp": 4, "zero": 1, "sp": False, "micro_batch": 2, "param_bytes": 2, "stage_layers": [1, 2]}
    assert config_line(config) == "dp 4 x tp 2, sp off, zero 1, micro-batch 2"
    assert config_line({}) == ""
