"""Export a serving plan as ``vllm serve`` commands (vLLM 0.10.1 flags, ``flags.VLLM``).

Aggregated replicas are independent servers; disaggregated workers connect through the NIXL KV
connector (``--kv-transfer-config``, vLLM's disaggregated prefill docs) behind a proxy of the user's
choice. Precision: ``fp8`` quantises a bf16 checkpoint at load (``--quantization fp8``); ``fp4``
needs an NVFP4 (ModelOpt) or MXFP4 checkpoint in ``MODEL``.
"""

from __future__ import annotations

import json

from planner.serving.export.common import (
    Worker,
    env_prefix,
    finish,
    join,
    model_word,
    script,
    workers,
)
from planner.serving.export.flags import VLLM
from planner.serving.schema import ServingPlan

QUANTIZATION = {"fp8": "fp8", "fp4": "modelopt_fp4"}


def command(plan: ServingPlan, worker: Worker) -> str:
    g, req = worker.group, plan.request
    words = ["vllm", "serve", model_word(), "--tensor-parallel-size", str(g.tp), "--pipeline-parallel-size", str(g.pp),
             "--max-num-seqs", str(max(1, g.concurrency_per_worker)), "--max-model-len", str(req.isl + req.osl),
             "--block-size", "16", "--gpu-memory-utilization", "0.9", "--port", str(worker.port)]
    if g.ep > 1 or g.attention_dp:
        words.append("--enable-expert-parallel")
    if req.precision in QUANTIZATION:
        words += ["--quantization", QUANTIZATION[req.precision]]
    if req.kv_dtype == "fp8":
        words += ["--kv-cache-dtype", "fp8"]
    if g.role != "aggregated":
        words += ["--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})]
    return finish(env_prefix(worker) + " " + join(words))


def export_vllm(plan: ServingPlan, gpus_per_node: int) -> str:
    lines = [(w, command(plan, w)) for w in workers(plan, gpus_per_node, "vllm")]
    extra = []
    if plan.estimate.deployment.mode == "disaggregated":
        extra = ["# Route requests through a prefill/decode proxy (vLLM examples/online_serving/disaggregated_serving)",
                 "# pointing at the prefill ports and the decode ports above."]
    return script(plan, "vllm", VLLM.version, lines, extra)
