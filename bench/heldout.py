"""Check the cost model against published runs that are NOT in ../shared/reference (held out).

Usage: python bench/heldout.py
Nothing was fitted on these runs: ``bench/calibrate.py`` reads only the shared file. Prints per run
the measured and predicted step time and, where the source prints it, per-GPU memory (model states
and activations of the first pipeline stage), then mean and max absolute error per GPU kind.

Sources:
- Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (MLSys 2023,
  arXiv:2205.05198): Table 5 iteration times (full recompute vs sequence parallel + selective
  recompute) and Figure 1 per-GPU memory, A100 80 GB (Selene), 8 to 512 GPUs, data parallel 1.
- Smith et al., "Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B" (arXiv:2201.11990)
  section 2.4: iteration times on 280, 350 and 420 DGX A100 nodes (2,240 to 3,360 GPUs).
- Dubey et al., "The Llama 3 Herd of Models" (arXiv:2407.21783) Table 4: Llama 3 405B on 8,192 and
  16,384 H100 GPUs (400 Gb/s RoCE), TFLOP/s per GPU.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from costmodel.flops import model_flops_per_step  # noqa: E402
from costmodel.specs import ClusterSpec, ModelSpec, ParallelConfig  # noqa: E402
from costmodel.step import estimate_step  # noqa: E402
from costmodel.table import build_cost_table  # noqa: E402
from planner.intake.models.presets import build_preset  # noqa: E402
from planner.reference.published import gpt_model  # noqa: E402
from profiles import load_cluster  # noqa: E402

ASSUMPTIONS = (
    "Korthikanti et al.: micro-batch 1 (4 for the 22B model, whose global batch is 4) and interleaving "
    "as in Calculon's validation inputs for the same table (calculon-ai/calculon validation/seqsel/"
    "tab5: v = 3 for 175B and 530B, none for 1T); fp16 with fp32 main gradients; eager attention "
    "(Megatron-LM in 2022, engine megatron, with the async TP backward and the gradient-accumulation fusion "
    "its sequence-parallel release has); 'full' = full recompute without SP, 'seqsel' = SP + selective recompute. "
    "Figure 1 memory is per GPU of the first pipeline stage, as the paper prints it.",
    "MT-NLG: tp 8 x pp 35 (section 2.4), DeepSpeed's pipeline engine (engine deepspeed: 1F1B, no interleaving), "
    "micro-batch 1, ZeRO-1, full activation checkpointing, fp16 gradients all-reduced after the "
    "pipeline flush (no overlap), accumulated across micro-batches by autograd in a pass of their own "
    "(DeepSpeed has no fused accumulation), synchronous TP collectives (Megatron-DeepSpeed disables "
    "async_tensor_model_parallel_allreduce), eager attention; vocabulary 50,272 (GPT-2 tokenizer padded).",
    "Llama 3: engine megatron (fused kernels and the async TP backward of a production stack; the native engine is meshplan's own eager runtime, which Meta did not run; before the native engine priced that runtime this row used the same Megatron-style time terms through it); micro-batch 1; interleaved 1F1B with one transformer layer per model chunk (v = 8), the "
    "layout section 3.3.2 describes: 'the first model chunk on the first stage has only the embedding, "
    "and the last model chunk on the last stage has only output projection and loss'; SP with TP; distributed optimizer (zero 1) for its FSDP (ZeRO-2-like "
    "under pipelining, gradients reduced once per step); FlashAttention. The paper prints no FLOP "
    "formula: meshplan's model FLOPs (causal half of attention, costmodel.flops) convert TFLOP/s to "
    "seconds per step.",
)


@dataclass(frozen=True)
class HeldOutRun:
    """One held-out published run: what ran, and what was measured."""

    label: str
    model: ModelSpec
    cluster: ClusterSpec
    config: ParallelConfig
    measured_step_s: float
    states_gib: float | None = None
    """Published per-GPU parameters + gradients + optimizer states (first stage), GiB."""
    activations_gib: float | None = None
    """Published per-GPU activation memory (first stage), GiB."""


KORTHIKANTI = {  # name: (layers, hidden, heads, tp, pp, gpus, global batch, micro-batch, v)
    "22B": (48, 6144, 64, 8, 1, 8, 4, 4, 1),
    "175B": (96, 12288, 96, 8, 8, 64, 64, 1, 3),
    "530B": (105, 20480, 128, 8, 35, 280, 280, 1, 3),
    "1T": (128, 25600, 160, 8, 64, 512, 512, 1, 1),
}
KORTHIKANTI_TIME_S = {  # Table 5: (full recompute, SP + selective recompute) seconds per iteration
    "22B": (1.42, 1.10), "175B": (18.13, 13.75), "530B": (49.05, 37.83), "1T": (94.42, 71.49),
}
KORTHIKANTI_MEMORY_GIB = {  # Figure 1: states; activations without recompute / with SP + selective
    "22B": (45.5625, 59.25, 9.5625), "175B": (45.5625, 66.84375, 12.3515625),
    "530B": (31.640625, 114.0234375, 23.076171875), "1T": (32.958984375, 131.25, 26.5625),
}


def korthikanti_runs() -> list[HeldOutRun]:
    """Table 5's eight timed runs and Figure 1's memory (no recompute, and SP + selective)."""
    cluster = load_cluster("dgx-a100")
    runs = []
    for name, (layers, h, heads, tp, pp, n, gbs, mbs, v) in KORTHIKANTI.items():
        row = {"model": f"GPT {name}", "hidden": str(h), "heads": str(heads), "seq_len": "2048",
               "vocab": "51200", "layers": str(layers), "kv_heads": "", "ffn_hidden": ""}
        model = gpt_model(row, gpt_style=True)
        base = ParallelConfig(tp=tp, pp=pp, dp=n // (tp * pp), vpp=v, micro_batch=mbs, global_batch=gbs,
                              seq_len=2048, attention="eager", schedule="interleaved-1f1b" if v > 1 else "1f1b",
                              engine="megatron")
        full_s, seqsel_s = KORTHIKANTI_TIME_S[name]
        states, act_none, act_seqsel = KORTHIKANTI_MEMORY_GIB[name]
        seqsel = base.model_copy(update={"sp": True, "recompute": "selective"})
        runs += [
            HeldOutRun(f"Korthikanti {name} full recompute @{n}", model, cluster,
                       base.model_copy(update={"recompute": "full"}), full_s),
            HeldOutRun(f"Korthikanti {name} SP + selective @{n}", model, cluster, seqsel, seqsel_s,
                       states, act_seqsel),
            HeldOutRun(f"Korthikanti {name} no recompute (memory) @{n}", model, cluster, base, float("nan"),
                       states, act_none),
        ]
    return runs


MTNLG_TIME_S = {2240: 60.1, 2800: 50.2, 3360: 44.4}
"""Smith et al. 2022 section 2.4: seconds per iteration at global batch 1920, sequence 2048."""


def mtnlg_runs() -> list[HeldOutRun]:
    """Megatron-Turing NLG 530B at three scales (data parallel 8, 10, 12)."""
    row = {"model": "MT-NLG 530B", "hidden": "20480", "heads": "128", "seq_len": "2048", "vocab": "50272",
           "layers": "105", "kv_heads": "", "ffn_hidden": ""}
    model, cluster = gpt_model(row, gpt_style=True), load_cluster("dgx-a100")
    runs = []
    for n, seconds in MTNLG_TIME_S.items():
        cfg = ParallelConfig(tp=8, pp=35, dp=n // 280, zero=1, micro_batch=1, global_batch=1920, seq_len=2048,
                             recompute="full", attention="eager", grad_bytes=2, grad_reduce_bytes=2,
                             overlap_grad_reduce=False, overlap_param_gather=False, engine="deepspeed")
        runs.append(HeldOutRun(f"MT-NLG 530B tp8 pp35 @{n}", model, cluster, cfg, seconds))
    return runs


LLAMA3 = (  # Table 4: gpus, tp, cp, pp, seq, TFLOP/s per GPU; 16M tokens per batch
    (8192, 8, 1, 16, 8192, 430.0),
    (16384, 8, 1, 16, 8192, 400.0),
    (16384, 8, 16, 16, 131072, 380.0),
)


def llama3_runs() -> list[HeldOutRun]:
    """Llama 3 405B pre-training configurations of Table 4."""
    model = build_preset("llama3.1-405b")
    cluster = load_cluster("dgx-h100")
    runs = []
    for n, tp, cp, pp, seq, tflops in LLAMA3:
        gbs = 16 * 2**20 // seq
        v = (len(model.layers) - 1) // pp  # one block per chunk; embedding and norm + head chunks
        stages = (1,) * (pp * v - 1) + (2,)
        cfg = ParallelConfig(tp=tp, cp=cp, pp=pp, dp=n // (tp * cp * pp), vpp=v, sp=True, zero=1, micro_batch=1,
                             global_batch=gbs, seq_len=seq, stage_layers=stages, schedule="interleaved-1f1b", engine="megatron")
        step = model_flops_per_step(model.layers, gbs, seq) / (n * tflops * 1e12)
        runs.append(HeldOutRun(f"Llama 3 405B tp{tp} cp{cp} pp{pp} seq {seq} @{n}", model, cluster, cfg, step))
    return runs


def _error(predicted: float, measured: float | None) -> float | None:
    """predicted / measured - 1, or None where the source prints no figure (None or NaN)."""
    if measured is None or math.isnan(measured):
        return None
    return predicted / measured - 1


def _cell(error: float | None) -> str:
    return f"{error:>+7.1%}" if error is not None else f"{'-':>7}"


def compare(runs: list[HeldOutRun]) -> list[tuple[HeldOutRun, float, float | None, float | None, float | None]]:
    """(run, predicted step s, time error, states error, activations error) for every run."""
    out = []
    for run in runs:
        est = estimate_step(build_cost_table(run.model, run.cluster), run.config)
        first = est.rank_memory_breakdown_gib[0]
        states = first["params"] + first["grads"] + first["optimizer_states"]
        out.append((run, est.step_time_s, _error(est.step_time_s, run.measured_step_s),
                    _error(states, run.states_gib), _error(first["activations"], run.activations_gib)))
    return out


def _summary(name: str, errors: list[float]) -> str:
    if not errors:
        return f"{name:<22} none"
    mags = [abs(e) for e in errors]
    return f"{name:<22} rows {len(mags):>2}  mean |error| {sum(mags) / len(mags):6.1%}  max {max(mags):6.1%}"


def main() -> int:
    results = compare(korthikanti_runs() + mtnlg_runs() + llama3_runs())
    print(f"{'run':<48} {'measured s':>10} {'predicted s':>11} {'time':>7} {'states':>7} {'acts':>7}")
    for run, predicted, t, s, a in results:
        measured = f"{run.measured_step_s:>10.2f}" if t is not None else f"{'-':>10}"
        print(f"{run.label:<48} {measured} {predicted:>11.2f} {_cell(t)} {_cell(s)} {_cell(a)}")
    print()
    a100 = [t for run, _, t, _, _ in results if t is not None and run.cluster.gpu.name.startswith("a100")]
    h100 = [t for run, _, t, _, _ in results if t is not None and run.cluster.gpu.name.startswith("h100")]
    table5 = [t for run, _, t, _, _ in results if t is not None and run.label.startswith("Korthikanti")]
    print(_summary("Korthikanti Table 5", table5) + "  (Calculon, SC'23: 3.65 %, max 8.87 %)")
    print(_summary("step time, A100", a100))
    print(_summary("step time, H100", h100))
    print(_summary("step time, all", a100 + h100))
    print(_summary("memory, model states", [s for *_, s, _ in results if s is not None]))
    print(_summary("memory, activations", [a for *_, a in results if a is not None]))
    print("\nassumptions:")
    for text in ASSUMPTIONS:
        print(f"  {text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
