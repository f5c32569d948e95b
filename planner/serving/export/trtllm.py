"""Export a serving plan as ``trtllm-serve`` commands (TensorRT-LLM 1.0.0, PyTorch backend,
``flags.TRTLLM``) with an ``--extra_llm_api_options`` YAML for what has no flag (attention DP, the
KV cache dtype, the cache transceiver of disaggregated workers). Disaggregated workers are tied
together by ``trtllm-serve disaggregated -c`` and its YAML (context / generation servers).
FP8 and FP4 need the matching ModelOpt checkpoint in ``MODEL``."""

from __future__ import annotations

import shlex

from planner.serving.export.common import (
    Worker,
    env_prefix,
    finish,
    join,
    model_word,
    script,
    workers,
)
from planner.serving.export.flags import TRTLLM
from planner.serving.schema import ServingPlan


def options_yaml(plan: ServingPlan, worker: Worker) -> str:
    """The LLM API options file of one worker group (YAML; every value a plain scalar)."""
    g = worker.group
    lines = [f"enable_attention_dp: {'true' if g.attention_dp else 'false'}",
             "kv_cache_config:", f"  dtype: {'fp8' if plan.request.kv_dtype == 'fp8' else 'auto'}",
             "  free_gpu_memory_fraction: 0.9"]
    if g.role != "aggregated":
        lines += ["disable_overlap_scheduler: true" if g.role == "prefill" else "disable_overlap_scheduler: false",
                  "cache_transceiver_config:", "  backend: DEFAULT"]
    return "\n".join(lines) + "\n"


def options_path(worker: Worker) -> str:
    return f"extra-llm-api-{worker.group.role}.yaml"


def command(plan: ServingPlan, worker: Worker) -> str:
    g, req = worker.group, plan.request
    words = ["trtllm-serve", model_word(), "--backend", "pytorch", "--tp_size", str(g.tp), "--pp_size", str(g.pp),
             "--ep_size", str(g.ep), "--max_batch_size", str(max(1, g.concurrency_per_worker)),
             "--max_num_tokens", "8192", "--max_seq_len", str(req.isl + req.osl),
             "--kv_cache_free_gpu_memory_fraction", "0.9", "--port", str(worker.port),
             "--extra_llm_api_options", options_path(worker)]
    return finish(env_prefix(worker) + " " + join(words))


def _heredoc(path: str, text: str) -> list[str]:
    return [f"cat > {shlex.quote(path)} <<'YAML'", text.rstrip("\n"), "YAML"]


def export_trtllm(plan: ServingPlan, gpus_per_node: int) -> str:
    placed = workers(plan, gpus_per_node, "trtllm")
    files: list[str] = []
    for role in dict.fromkeys(w.group.role for w in placed):
        first = next(w for w in placed if w.group.role == role)
        files += _heredoc(options_path(first), options_yaml(plan, first))
    lines = [(w, command(plan, w)) for w in placed]
    extra = []
    if plan.estimate.deployment.mode == "disaggregated":
        cfg = ["hostname: localhost", "port: 8100", "backend: pytorch"]
        for role, key in (("prefill", "context_servers"), ("decode", "generation_servers")):
            mine = [w for w in placed if w.group.role == role]
            cfg += [f"{key}:", f"  num_instances: {len(mine)}", "  urls:"]
            cfg += [f'    - "node{w.node}:{w.port}"' for w in mine]
        extra = _heredoc("disagg-config.yaml", "\n".join(cfg) + "\n") + [join(["trtllm-serve", "disaggregated", "-c", "disagg-config.yaml"]) + " &"]
    body = script(plan, "trtllm", TRTLLM.version, lines, extra)
    head, _, rest = body.partition("\n\n")
    return head + "\n\n" + "\n".join(files) + "\n\n" + rest
