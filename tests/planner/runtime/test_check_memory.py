"""The memory check's own machinery: schedule orders, depth extrapolation, the command line.

BUDGET: about 30 s on 2 cores (the extrapolation test runs 20 fake blocks; the CLI test one
real-size Llama 3.1 8B check at three shallow depths).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.cli import main
from planner.intake.models.builder import decoder_lm
from planner.intake.models.presets import build_preset
from planner.runtime.memcheck.check import check_memory
from planner.runtime.memcheck.cases import CASES, Case, case_plan
from planner.runtime.memcheck.step import schedule_actions


def _plan(config: dict, model: str = "llama3.1-8b"):
    return case_plan(Case("t", model, config))


def _first_backward(actions) -> int:
    return next(i for i, a in enumerate(actions) if a.kind == "B")


def test_schedules_hold_their_in_flight_micro_batches() -> None:
    """1F1B rank r holds min(pp - r, m) forwards at its first backward, GPipe all m, interleaved
    1F1B Megatron's warm-up 2(pp - r - 1) + (v - 1)pp plus one, then steady-state pairs;
    every chunk ends on a synced backward."""
    base = dict(dp=1, global_batch=8, seq_len=128)
    one = _plan({**base, "pp": 4})
    assert [_first_backward(schedule_actions(one, r)) for r in range(4)] == [4, 3, 2, 1]
    gpipe = _plan({**base, "pp": 4, "schedule": "gpipe"})
    assert _first_backward(schedule_actions(gpipe, 0)) == 8
    inter = _plan({**base, "pp": 2, "vpp": 2, "schedule": "interleaved-1f1b", "global_batch": 4})
    acts = schedule_actions(inter, 0)
    assert _first_backward(acts) == 2 * (2 - 0 - 1) + (2 - 1) * 2 + 1
    assert [a.chunk for a in acts[:5]] == [0, 0, 1, 1, 0]
    for plan, rank in ((one, 3), (gpipe, 1), (inter, 1)):
        steps = schedule_actions(plan, rank)
        last = plan.schedule.num_microbatches - 1
        for chunk in {a.chunk for a in steps}:
            syncs = [a for a in steps if a.kind == "B" and a.chunk == chunk and a.last]
            assert len(syncs) == 1 and syncs[0].micro == last
        forwards = {(a.chunk, a.micro) for a in steps if a.kind == "F"}
        assert forwards == {(a.chunk, a.micro) for a in steps if a.kind == "B"}
    # the steady state: after the first backward one more forward holds the warm-up's micro-batches
    # again, now beside the gradients the first backward accumulated
    assert [(a.kind, a.micro) for a in schedule_actions(one, 0)[4:7]] == [("B", 0), ("F", 4), ("B", 1)]
    assert [a.kind for a in schedule_actions(gpipe, 0)].count("F") == 8  # GPipe holds them all: no steady state
    # without pipelining a second micro-batch meets the first one's gradients
    assert [a.kind for a in schedule_actions(_plan(base), 0)] == ["F", "B", "F", "B"]
    assert [a.kind for a in schedule_actions(_plan({**base, "global_batch": 1}), 0)] == ["F", "B"]


def test_interleaved_steady_state_reaches_every_chunks_gradients() -> None:
    """An interleaved rank's steady state runs until each local chunk has run a backward, each
    steady forward bringing the in-flight chunk-micro-batches back to the warm-up's count: from there
    on the rank holds every chunk's gradients beside a full warm-up (its periodic peak)."""
    pp, v, m = 2, 4, 8
    plan = _plan(dict(dp=1, pp=pp, vpp=v, schedule="interleaved-1f1b", global_batch=m, seq_len=128))
    acts = schedule_actions(plan, 0)
    flight = 2 * (pp - 1) + (v - 1) * pp + 1
    held: set[tuple[int, int]] = set()
    backed: set[int] = set()
    full_with_all_grads = False
    for a in acts:
        if a.kind == "F":
            held.add((a.chunk, a.micro))
            full_with_all_grads |= len(held) == flight and backed == set(range(v))
        else:
            held.remove((a.chunk, a.micro))
            backed.add(a.chunk)
    assert full_with_all_grads and not held
    one_pair_short = [a for a in acts if a.kind == "B"][: (v - 1) * pp]
    assert {a.chunk for a in one_pair_short} != set(range(v))  # fewer pairs would not reach chunk 0


def test_extrapolated_depth_equals_full_depth() -> None:
    """Memory is affine in the number of repeated blocks: two shallow runs give the deep one."""
    block = build_preset("llama3.1-8b").layers[1].model_copy(update=dict(hidden_size=1024, num_heads=8, num_kv_heads=2,
                                                                         head_dim=128, ffn_hidden_size=3584))
    spec = decoder_lm("llama-shape", blocks=[block] * 8, vocab_size=8192, tied_embeddings=False, max_seq_len=4096,
                      source="Llama 3.1 block shape at width 1024")
    from costmodel.specs import ParallelConfig
    from costmodel.step import estimate_step
    from costmodel.table import build_cost_table
    from planner.intake.arguments import resolve_cluster_arg
    from planner.plans.build import build_plan
    from search.types import Candidate, SearchRequest, SearchResult, SearchStats

    cluster = resolve_cluster_arg("dgx-h100")
    cfg = ParallelConfig(dp=4, zero=3, recompute="full", global_batch=4, seq_len=1024)
    result = SearchResult(best=Candidate(cfg, estimate_step(build_cost_table(spec, cluster), cfg)), alternatives=(),
                          stats=SearchStats(evaluated=1, pruned=0, solver="fixed", status="optimal", gap=0.0, wall_time_s=0.0))
    plan = build_plan("llama-shape", spec, cluster, SearchRequest(gpus=4, global_batch=4, seq_len=1024), result, False)
    full = check_memory(plan, model=spec, full_depth=True).ranks[0]
    quick = check_memory(plan, model=spec).ranks[0]
    assert quick.extrapolated and not full.extrapolated
    assert quick.measured_peak_gib == pytest.approx(full.measured_peak_gib, rel=1e-6)
    for cat, value in full.measured_gib.items():
        # categories to the KiB (a few KiB of per-unit bookkeeping tensors are not affine in depth)
        assert quick.measured_gib[cat] == pytest.approx(value, rel=1e-6, abs=1e-5), cat
    assert full.predicted_peak_gib == quick.predicted_peak_gib


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # FSDP (ZeRO-3) with selective recomputation: without it the case needs 94 GiB as the native
    # runtime runs it (eager activations), and its plan no longer validates on 80 GB GPUs
    base = next(c for c in CASES if c.name == "llama8b-fsdp8-zero3")
    case = Case("llama8b-fsdp8-zero3-selective", base.model, dict(base.config, recompute="selective"))
    path = tmp_path_factory.mktemp("memcheck") / "plan.json"
    path.write_text(case_plan(case).to_json())
    return path


def test_cli_json_has_measured_and_predicted_peak_per_rank_kind(plan_file: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["check-memory", str(plan_file), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["world_size"] == 8 and out["mixed_precision"] is True
    (rank,) = out["ranks"]
    assert {"measured_peak_gib", "predicted_peak_gib", "measured_gib", "predicted_gib", "gpu_only_gib"} <= set(rank)
    assert set(rank["measured_gib"]) == {"params", "grads", "optimizer_states", "activations", "temporaries", "buffers"}
    # FSDP2 mixed precision over 8 ranks: fp32 shards (4 B) and Adam m, v (8 B) of 8.03 B parameters
    assert rank["measured_gib"]["params"] == pytest.approx(4 * 8_030_261_248 / 8 / 2**30, rel=1e-3)
    assert rank["measured_gib"]["optimizer_states"] == pytest.approx(8 * 8_030_261_248 / 8 / 2**30, rel=1e-3)
    assert rank["measured_peak_gib"] == pytest.approx(sum(rank["measured_gib"].values()), rel=1e-9)


@pytest.mark.parametrize("argv, message", [
    (["--pp-rank", "3"], "--pp-rank 3 is not a pipeline rank of the plan (pp 1: 0..0)"),
    (["--model", "llama3.1-70b"], "has 83 layers and 70,553,706,496 parameters but the plan's model 'llama3.1-8b' has 35"),
])
def test_cli_bad_input_exits_2_with_one_line(plan_file: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    assert main(["check-memory", str(plan_file), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_cli_missing_plan_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["check-memory", str(tmp_path / "nope.json")]) == 2
    assert "nope.json" in capsys.readouterr().err


@pytest.mark.parametrize("preset", ["llama3.1-8b", "megatron-gpt-16b"])
def test_eager_block_bytes_are_what_autograd_keeps(preset: str) -> None:
    """The torchtitan (eager) engine's stored bytes per block equal the tensors autograd saves for
    the runtime's block in bf16 (RMSNorm + SwiGLU + GQA, and LayerNorm + GELU + MHA), within the
    per-token rotary tables and norm statistics the model leaves out (< 1 %)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from costmodel.activations import block_activation_bytes
    from costmodel.specs import ParallelConfig
    from costmodel.step import local_config
    from costmodel.table import build_cost_table
    from planner.intake.arguments import resolve_cluster_arg
    from planner.runtime.models import Block

    spec = build_preset(preset)
    layer = spec.layers[1].model_copy(update=dict(dropout=False))  # the runtime's blocks have no dropout
    seq = 1024
    with FakeTensorMode():
        block = Block(layer, rotary=preset.startswith("llama"))
        for p in block.parameters():
            p.data = p.data.to(torch.bfloat16)
        params = {id(p.untyped_storage()) for p in block.parameters()}
        saved: dict[int, int] = {}

        def pack(t: torch.Tensor) -> torch.Tensor:
            key = id(t.untyped_storage())
            if key not in params:
                saved.setdefault(key, t.untyped_storage().nbytes())
            return t

        x = torch.empty(1, seq, layer.hidden_size, dtype=torch.bfloat16, requires_grad=True)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            block(x)
    cfg = ParallelConfig(global_batch=1, seq_len=seq, engine="torchtitan")
    table = build_cost_table(spec.model_copy(update={"layers": (spec.layers[0], layer, *spec.layers[2:])}), resolve_cluster_arg("dgx-h100"))
    stored, _ = block_activation_bytes(layer, local_config(table, cfg, "none"), [])
    assert stored == pytest.approx(sum(saved.values()), rel=0.01)


def test_attention_dropout_is_measured_in_the_fused_kernel() -> None:
    """SDPA with dropout keeps no s x s tensor on a GPU (the fused kernels draw the mask inside);
    on the CPU tensors of the check torch would take its math path, which keeps the probabilities
    and the mask: the tracked step runs SDPA as the GPU does."""
    import torch
    import torch.nn.functional as F
    from torch._subclasses.fake_tensor import FakeTensorMode

    from planner.runtime.memcheck.step import _gpu_attention_kernels

    seq, heads = 512, 4

    def largest_saved() -> int:
        sizes: list[int] = []
        with FakeTensorMode():
            q, k, v = (torch.empty(1, heads, seq, 64, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
            with torch.autograd.graph.saved_tensors_hooks(lambda t: sizes.append(t.numel()) or t, lambda t: t):
                F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True)
        return max(sizes)

    assert largest_saved() >= heads * seq * seq  # the math path's probabilities
    with _gpu_attention_kernels():
        assert largest_saved() == heads * seq * 64  # q, k, v and the output only
    assert F.scaled_dot_product_attention.__name__ == "scaled_dot_product_attention"  # restored


def test_prediction_is_for_the_module_torch_runs() -> None:
    """The runtime's decoder has no dropout: a preset specified with dropout is predicted without
    its masks, and the check says so; a model without dropout is predicted as specified."""
    from planner.intake.arguments import resolve_model_arg
    from planner.runtime.memcheck.check import _as_built

    gpt = resolve_model_arg("megatron-gpt-1.7b")
    built, note = _as_built(gpt, "megatron-gpt-1.7b", False)
    assert gpt.layers[1].dropout and not built.layers[1].dropout and "without dropout masks" in note[0]
    llama = resolve_model_arg("llama3.1-8b")
    assert _as_built(llama, "llama3.1-8b", False) == (llama, [])
