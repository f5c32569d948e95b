"""The report's facts: numbers with their formulas, the binding constraint, the runner-up."""

from __future__ import annotations

from planner.outputs.report import facts, fmt


def test_summary_states_each_number_with_its_formula(llama_plan) -> None:
    rows = {r.label: r for r in facts.summary_rows(llama_plan)}
    e = llama_plan.estimate
    assert rows["predicted step time"].value == fmt.seconds(e.step_time_s)
    assert "989 TFLOP/s dense BF16 peak" in rows["MFU"].how
    assert rows["memory margin"].value.startswith(fmt.gib(e.memory_capacity_gib - e.peak_memory_gib))
    assert rows["micro-batches per step"].value == "128" and "512 / (micro-batch 1 x dp 4)" in rows["micro-batches per step"].how


def test_binding_constraint(llama_plan) -> None:
    text = facts.binding_constraint(llama_plan)
    used = llama_plan.estimate.peak_memory_gib / llama_plan.estimate.memory_capacity_gib
    assert llama_plan.estimate.fits
    assert text.startswith("memory:" if used >= facts.MEMORY_TIGHT else "time:")
    assert "largest cost beyond compute" in text


def test_binding_constraint_of_a_plan_that_does_not_fit(plan_factory) -> None:
    plan = plan_factory("llama3.1-70b", "dgx-h100", tp=2, pp=4, cp=2, dp=4, sp=True, zero=1, global_batch=512, seq_len=8192)
    assert not plan.estimate.fits
    assert facts.binding_constraint(plan).startswith("memory: the plan does not fit")
    assert facts.alternative_rows(plan)[0][-1] == "closest to fitting (nothing fits)"


def test_runner_up_side_by_side(llama_plan) -> None:
    rows = {r[0]: r for r in facts.runner_up_rows(llama_plan, {"compute": 1.0, "recompute": 0.0, "exposed_comm": 2.0, "pipeline_bubble": 0.5, "optimizer": 0.01})}
    assert rows["cp"][1:] == ("2", "4", "differs") and rows["dp"][1:] == ("4", "2", "differs")
    assert rows["tp"][3] == "same"
    alt = llama_plan.alternatives[0]
    assert rows["step time"][2] == fmt.seconds(alt.step_time_s)
    assert "exposed communication" in rows


def test_why_the_runner_up_lost_names_what_changed(llama_plan) -> None:
    text = facts.why_runner_up_lost(llama_plan)
    assert "cp 2 -> 4" in text and "dp 4 -> 2" in text and "micro-batch 1 -> 2" in text
    assert facts.why_runner_up_lost(llama_plan.model_copy(update={"alternatives": []})).startswith("No alternative")


def test_alternatives_table_starts_with_the_chosen_plan(llama_plan) -> None:
    rows = facts.alternative_rows(llama_plan)
    assert rows[0][0] == "chosen" and len(rows) == 1 + len(llama_plan.alternatives)
    assert rows[1][3].startswith("+") or rows[1][3].startswith("-")


def test_stage_rows(llama_plan, small_plan) -> None:
    rows = facts.stage_rows(llama_plan)
    assert len(rows) == 4 and rows[0][4].startswith("embedding + ") and rows[-1][4].endswith("final_norm + output")
    small = facts.stage_rows(small_plan)
    assert [r[2] for r in small] == ["0", "0", "1", "1"] and all(r[5].startswith("full") for r in small)


def test_content_and_ranges() -> None:
    names = ["embedding", "block", "block", "block", "final_norm", "output"]
    assert facts.content(names, [0, 1, 2]) == "embedding + 2 x block"
    assert facts.content(names, []) == "(empty)"
    assert fmt.ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"


def test_sharding_line_follows_zero(llama_plan, small_plan) -> None:
    assert "ZeRO-3: parameters, gradients and optimizer states are sharded 8-way over dp x cp" in facts.sharding_line(llama_plan)
    assert "ZeRO-3: parameters, gradients and optimizer states are sharded 4-way" in facts.sharding_line(small_plan)


def test_placement_rows(llama_plan) -> None:
    rows = {r[0]: r for r in facts.placement_rows(llama_plan)}
    assert rows["TP"][4] == "inside one node (NVLink)" and rows["DP"][4].startswith("across the network")


def test_assumptions_cite_sources(llama_plan) -> None:
    rows = facts.assumption_rows(llama_plan)
    assert all(r.how for r in rows if r.label != "estimator")
    assert any("MFU counts model FLOPs" in r.value for r in rows)


def test_formatting() -> None:
    assert fmt.seconds(50.0181) == "50.018 s" and fmt.seconds(0.0123) == "12.3 ms" and fmt.seconds(4.5e-5) == "45 us"
    assert fmt.signed_percent(0.038) == "+3.8 %" and fmt.signed_seconds(-0.5) == "-500 ms"
    assert fmt.axis_seconds(2.0) == "2 s" and fmt.axis_seconds(0.5) == "500 ms"
