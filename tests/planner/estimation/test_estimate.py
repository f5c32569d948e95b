"""planner.estimate: the contract's keys, derived DP, defaults stated as assumptions, non-fitting
configurations, and one-line InputErrors."""

from __future__ import annotations

import pytest

import planner
from planner.errors import InputError

GPT3 = dict(model="gpt3-175b", cluster="dgx-a100", gpus=1024, global_batch=1536, seq_len=2048)
KEYS = {"step_time_s", "tokens_per_s", "mfu", "model_tflops_per_gpu", "peak_memory_gib", "fits", "time_breakdown_s", "memory_breakdown_gib"}


def test_contract_keys_and_consistency() -> None:
    out = planner.estimate(**GPT3, tp=8, pp=16).model_dump()
    assert KEYS <= out.keys()
    assert set(out["time_breakdown_s"]) == {"compute", "exposed_comm", "pipeline_bubble", "recompute", "optimizer"}
    mem = out["memory_breakdown_gib"]
    assert set(mem) == {"params", "grads", "optimizer_states", "activations", "activations_at_peak", "buffers"}
    assert sum(out["time_breakdown_s"].values()) == pytest.approx(out["step_time_s"], rel=1e-9)
    assert sum(v for k, v in mem.items() if k != "activations") == pytest.approx(out["peak_memory_gib"], rel=1e-9)
    assert mem["activations"] >= mem["activations_at_peak"] > 0
    assert out["config"]["dp"] == 8
    assert out["tokens_per_s"] == pytest.approx(1536 * 2048 / out["step_time_s"])
    assert 0.2 < out["mfu"] < 0.8
    assert any("dp = 1024" in a for a in out["assumptions"])


def test_more_recompute_trades_time_for_memory() -> None:
    none = planner.estimate(**GPT3, tp=8, pp=16, recompute="none")
    full = planner.estimate(**GPT3, tp=8, pp=16, recompute="full")
    assert full.step_time_s > none.step_time_s
    assert full.peak_memory_gib < none.peak_memory_gib
    assert full.time_breakdown_s.recompute > 0 == none.time_breakdown_s.recompute


def test_configuration_that_does_not_fit_still_estimates() -> None:
    out = planner.estimate(model="gpt3-175b", cluster="dgx-a100", gpus=8, global_batch=8, seq_len=2048, tp=8)
    assert not out.fits and out.over_by_gib > 0
    assert out.peak_memory_gib == pytest.approx(out.memory_capacity_gib + out.over_by_gib)


@pytest.mark.parametrize(
    "changes, needle",
    [
        (dict(tp=8, pp=16, gpus=1000), "does not divide"),
        (dict(tp=7), "tp"),
        (dict(model="gpt3-175bb"), "did you mean"),
        (dict(cluster="dgx-a1000"), "dgx-a100"),
        (dict(global_batch=0), "global"),
    ],
)
def test_bad_input_is_one_line(changes: dict, needle: str) -> None:
    with pytest.raises(InputError) as err:
        planner.estimate(**{**GPT3, "tp": 8, "pp": 16, **changes})
    assert needle in str(err.value) and "\n" not in str(err.value)


LLAMA8 = dict(model="llama3.1-8b", cluster="dgx-h100", gpus=8, global_batch=16, seq_len=8192, micro_batch=2, recompute="selective")


def test_engine_knobs_reach_the_configuration() -> None:
    out = planner.estimate(**LLAMA8, target="torchtitan", compile=True, precision="fp8", grad_reduce_dtype="bf16", dp_overlap=False)
    cfg = out.config
    assert (cfg["engine"], cfg["compile"], cfg["precision"], cfg["zero"]) == ("torchtitan", True, "fp8", 3)
    assert (cfg["grad_reduce_bytes"], cfg["overlap_grad_reduce"], cfg["overlap_param_gather"]) == (2, False, False)
    assert any("torchao" in a for a in out.assumptions) and any("FSDP2" in a for a in out.assumptions)
    eager = planner.estimate(**LLAMA8, target="torchtitan", precision="fp8", grad_reduce_dtype="bf16", dp_overlap=False)
    assert eager.step_time_s > out.step_time_s


def test_megatron_knobs_and_attention_kernel() -> None:
    base = dict(model="llama3.1-8b", cluster="dgx-h100", gpus=8, global_batch=16, seq_len=4096, tp=2)
    fused = planner.estimate(**base, target="megatron", tp_overlap=True, loss_fusion=True, grad_reduce_dtype="bf16")
    assert fused.config["tp_comm_overlap"] and fused.config["loss_fusion"] and fused.config["grad_bytes"] == 2
    plain = planner.estimate(**base, target="megatron")
    assert fused.step_time_s < plain.step_time_s and fused.peak_memory_gib < plain.peak_memory_gib
    eager = planner.estimate(**base, target="megatron", attention="eager")
    assert eager.step_time_s > plain.step_time_s and eager.config["attention"] == "eager"
    sync = planner.estimate(**base, target="megatron", tp_async=False)  # Megatron-LM before its async TP backward
    assert sync.config["tp_async_backward"] is False and sync.step_time_s > plain.step_time_s
    assert any("async TP" in a for a in plain.assumptions)
    unfused = planner.estimate(**base, target="megatron", grad_accum_fusion=False)  # 4 micro-batches, added unfused
    assert unfused.config["grad_accum_fusion"] is False and unfused.step_time_s > plain.step_time_s


@pytest.mark.parametrize(
    "changes, needle",
    [
        (dict(cluster="dgx-a100", precision="fp8"), "no FP8 tensor cores"),
        (dict(target="megatron", tp_overlap=True), "tp-overlap needs tp > 1"),
        (dict(target="deepspeed", loss_fusion=True), "loss-fusion"),
        (dict(target="trt"), "target must be one of"),
        (dict(grad_reduce_dtype="fp16"), "grad-reduce-dtype"),
        (dict(offload_optimizer=True), "host_link_bandwidth_gbps"),
        (dict(tp_async="yes"), "tp_async must be True, False or None"),
        (dict(target="torchtitan", grad_accum_fusion=True), "grad-accum-fusion"),
        (dict(zero=1, zero3_bucket=50_000_000), "zero3-bucket"),
        (dict(zero=3, zero3_bucket=0), "zero3_bucket must be a positive"),
    ],
)
def test_bad_engine_knobs_are_one_line(changes: dict, needle: str) -> None:
    with pytest.raises(InputError) as err:
        planner.estimate(**{**LLAMA8, **changes})
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_cli_engine_flags(tmp_path) -> None:  # noqa: ANN001
    import json
    import subprocess
    import sys
    from pathlib import Path

    cli = Path(__file__).resolve().parents[3] / "cli.py"
    args = ["estimate", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "16", "--seq-len", "8192",
            "--micro-batch", "2", "--recompute", "selective", "--target", "torchtitan", "--compile", "--precision", "fp8",
            "--grad-reduce-dtype", "fp32", "--no-dp-overlap", "--attention", "flash", "--json"]
    out = subprocess.run([sys.executable, str(cli), *args], capture_output=True, text=True, check=True)
    cfg = json.loads(out.stdout)["config"]
    assert (cfg["engine"], cfg["compile"], cfg["precision"], cfg["overlap_grad_reduce"]) == ("torchtitan", True, "fp8", False)
    bad = subprocess.run([sys.executable, str(cli), *args[:-1], "--cluster", "dgx-a100"], capture_output=True, text=True)
    assert bad.returncode == 2 and "no FP8 tensor cores" in bad.stderr and "Traceback" not in bad.stderr
    layout = ["estimate", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16", "--global-batch", "64", "--seq-len", "4096",
              "--tp", "2", "--pp", "2", "--vpp", "3", "--stage-layers", "1,8,8,8,8,2", "--schedule", "interleaved-1f1b", "--no-tp-async", "--no-grad-accum-fusion", "--json"]
    cfg = json.loads(subprocess.run([sys.executable, str(cli), *layout], capture_output=True, text=True, check=True).stdout)["config"]
    assert cfg["stage_layers"] == [1, 8, 8, 8, 8, 2] and cfg["schedule"] == "interleaved-1f1b" and cfg["tp_async_backward"] is False
    assert cfg["grad_accum_fusion"] is False


def test_zero3_bucket_sets_deepspeeds_collective_count() -> None:
    """DeepSpeed ZeRO-3 gathers ``stage3_prefetch_bucket_size`` parameters per collective: smaller
    buckets mean more collectives, each paying the ring latency."""
    base = dict(model="llama3.1-8b", cluster="dgx-a100", gpus=64, global_batch=64, seq_len=2048, zero=3, target="deepspeed", dp_overlap=False)
    small = planner.estimate(**base, zero3_bucket=1_000_000)
    assert small.config["zero3_bucket_params"] == 1_000_000
    assert small.step_time_s > planner.estimate(**base, zero3_bucket=50_000_000).step_time_s


def test_deepspeed_defaults_to_no_dp_overlap_below_zero_3() -> None:
    """DeepSpeed config docs: ``overlap_comm`` defaults to false (true only for ZeRO-3)."""
    base = dict(model="llama3.1-8b", cluster="dgx-a100", gpus=16, global_batch=32, seq_len=2048, recompute="full")
    ds = planner.estimate(**base, target="deepspeed", zero=1)
    assert not ds.config["overlap_grad_reduce"] and any("overlap_comm" in a for a in ds.assumptions)
    assert planner.estimate(**base, target="deepspeed", zero=1, dp_overlap=True).config["overlap_grad_reduce"]
    assert planner.estimate(**base, target="deepspeed", zero=3).config["overlap_param_gather"]


def test_llama3_405b_layout_validates_and_exports() -> None:
    """Llama 3 (Dubey et al. 2024, §3.3.2): pp x vpp chunks where the first holds only the embedding
    and the last only the final norm and the head; the blocks need not divide the chunk count."""
    from planner.outputs.export import export

    stages = (1, 8, 8, 8, 8, 2)  # Llama 3.1 8B: embedding | 4 x 8 blocks | norm + head
    est = planner.estimate(model="llama3.1-8b", cluster="dgx-h100", gpus=16, global_batch=64, seq_len=4096, tp=2, pp=2, vpp=3, stage_layers=stages)
    assert tuple(est.config["stage_layers"]) == stages and [c for r in est.pipeline_ranks for c in r.chunks][0] == [0, 1]
    mega = planner.config_plan(model="llama3.1-8b", cluster="dgx-h100", gpus=16, global_batch=64, seq_len=4096, tp=2, pp=2, vpp=3,
                               stage_layers=stages, target="megatron")
    argv = export(mega, "megatron").argv()
    assert argv[argv.index("--pipeline-model-parallel-layout") + 1] == "E|t*8|t*8|t*8|t*8|L"
    titan = planner.config_plan(model="llama3.1-8b", cluster="dgx-h100", gpus=16, global_batch=64, seq_len=4096, tp=2, pp=2, vpp=3,
                                stage_layers=stages, target="torchtitan", recompute="full")
    parts = export(titan, "torchtitan").model_dump()
    fqns = next(v for k, v in _walk(parts) if k == "module_fqns_per_model_part")
    assert fqns[0] == ["tok_embeddings"] and len(fqns[-1]) == 2 and fqns[-1][0] == "norm"


def _walk(node):  # noqa: ANN001, ANN202
    """(key, value) pairs of a nested dict/list."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield k, v
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)
