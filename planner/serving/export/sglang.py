"""Export a serving plan as ``python -m sglang.launch_server`` commands (SGLang 0.4.10 flags,
``flags.SGLANG``): TP / PP / EP sizes, DP attention, and for disaggregation the prefill and decode
servers (``--disaggregation-mode``, NIXL transfer) behind ``sglang.srt.disaggregation.mini_lb``.
An instance wider than a node runs as ``--nnodes`` processes, one per node."""

from __future__ import annotations

from planner.serving.export.common import (
    Worker,
    env_prefix,
    finish,
    join,
    model_word,
    mxfp4_checkpoint,
    script,
    workers,
)
from planner.serving.export.flags import SGLANG
from planner.serving.schema import ServingPlan

QUANTIZATION = {"fp8": "fp8", "fp4": "modelopt_fp4"}
KV_DTYPE = {"fp8": "fp8_e4m3"}


def commands(plan: ServingPlan, worker: Worker, gpus_per_node: int) -> list[str]:
    g, req = worker.group, plan.request
    words = ["python", "-m", "sglang.launch_server", "--model-path", model_word(), "--tp-size", str(g.tp),
             "--pp-size", str(g.pp), "--max-running-requests", str(max(1, g.concurrency_per_worker)),
             "--context-length", str(req.isl + req.osl), "--port", str(worker.port)]
    if g.ep > 1:
        words += ["--ep-size", str(g.ep)]
    if g.attention_dp:
        words += ["--enable-dp-attention", "--dp-size", str(g.tp)]
    if req.precision in QUANTIZATION and not mxfp4_checkpoint(plan):
        words += ["--quantization", QUANTIZATION[req.precision]]
    if req.kv_dtype in KV_DTYPE:
        words += ["--kv-cache-dtype", KV_DTYPE[req.kv_dtype]]
    if g.role != "aggregated":
        words += ["--disaggregation-mode", g.role, "--disaggregation-transfer-backend", "nixl"]
    nodes = -(-g.gpus_per_worker // gpus_per_node)
    if nodes == 1:
        return [finish(env_prefix(worker) + " " + join(words))]
    return [finish(join(words + ["--nnodes", str(nodes), "--node-rank", str(rank), "--dist-init-addr",
                                 f"node{worker.node}:{20000 + worker.port}"])) for rank in range(nodes)]


def export_sglang(plan: ServingPlan, gpus_per_node: int) -> str:
    lines = [(w, line) for w in workers(plan, gpus_per_node, "sglang", multi_node_ok=True)
             for line in commands(plan, w, gpus_per_node)]
    extra = []
    if plan.estimate.deployment.mode == "disaggregated":
        pre = [w for w, _ in lines if w.group.role == "prefill"]
        dec = [w for w, _ in lines if w.group.role == "decode"]
        words = ["python", "-m", "sglang.srt.disaggregation.mini_lb"]
        words += ["--prefill", *sorted({f"http://node{w.node}:{w.port}" for w in pre})]
        words += ["--decode", *sorted({f"http://node{w.node}:{w.port}" for w in dec})]
        extra = ["# router in front of the prefill and decode servers", join(words) + " &"]
    return script(plan, "sglang", SGLANG.version, lines, extra)
