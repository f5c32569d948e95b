"""The packaged serving runs (planner/reference/serving_runs.csv) and their reader."""

from __future__ import annotations

from planner.intake.models import resolve_model
from planner.reference.serving_runs import MODELS, read_rows, serving_runs


def test_every_row_is_read_and_only_dataset_rows_are_skipped() -> None:
    runs, skipped = serving_runs()
    assert len(read_rows()) == 146
    assert len(runs) + len(skipped) == 146
    assert all("dataset" in why for _, why in skipped)
    assert {r.source for r in runs} == {"TensorRT-LLM performance overview"}


def test_runs_use_presets_and_published_layouts() -> None:
    runs, _ = serving_runs()
    for preset in MODELS.values():
        resolve_model(preset)
    qwen = [r for r in runs if r.model == "qwen3-235b-a22b"]
    assert qwen and all(r.attention_dp and r.ep == r.tp == 8 for r in qwen)
    llama = next(r for r in runs if r.model == "llama3.1-8b" and r.isl == 128 and r.osl == 128 and r.gpu == "H100")
    assert (llama.tp, llama.measured_tokens_per_s_per_gpu, llama.precision) == (1, 28312.0, "fp8")
