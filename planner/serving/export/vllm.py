"""Export a serving plan as ``vllm serve`` commands (vLLM 0.10.1 flags, ``flags.VLLM``).

Aggregated replicas are independent servers; disaggregated workers connect through the NIXL KV
connector (``--kv-transfer-config``, vLLM's disaggregated prefill docs) behind a proxy of the user's
choice. Precision: ``fp8`` quantises a bf16 checkpoint at load (``--quantization fp8``); ``fp4``
needs an NVFP4 (ModelOpt) checkpoint in ``MODEL``, or is gpt-oss's own MXFP4 one (no ``--quantization``: the checkpoint states it). Where the estimate follows vLLM's own
recipe (gpt-oss's MXFP4 on Blackwell, ``planner.serving.request.follows_recipe``), the command
launches it: the FP8 KV cache the plan states and :data:`RECIPE_COMPILATION`.
"""

from __future__ import annotations

import json

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
from planner.serving.export.flags import VLLM
from planner.serving.request import follows_recipe
from planner.serving.schema import ServingPlan

QUANTIZATION = {"fp8": "fp8", "fp4": "modelopt_fp4"}
RECIPE_COMPILATION = {"pass_config": {"enable_fi_allreduce_fusion": True, "enable_noop": True}, "custom_ops": ["+rms_norm"]}
"""``--compilation-config`` of vLLM's gpt-oss Blackwell recipe as vLLM 0.10's ``PassConfig`` names it: FlashInfer's
fused all-reduce + RMSNorm pass (``enable_fi_allreduce_fusion``, later ``fuse_allreduce_rms``), the no-op
elimination it needs and the RMSNorm custom op its pattern matches (vllm-project/recipes ``GPT-OSS_Blackwell.yaml``;
the same pass_config and custom_ops in the Blackwell recipes quoted in vllm-project/vllm issue 25689)."""


def command(plan: ServingPlan, worker: Worker) -> str:
    g, req = worker.group, plan.request
    words = ["vllm", "serve", model_word(), "--tensor-parallel-size", str(g.tp), "--pipeline-parallel-size", str(g.pp),
             "--max-num-seqs", str(max(1, g.concurrency_per_worker)), "--max-model-len", str(req.isl + req.osl),
             "--block-size", "16", "--gpu-memory-utilization", "0.9", "--port", str(worker.port)]
    if g.ep > 1 or g.attention_dp:
        words.append("--enable-expert-parallel")
    if req.precision in QUANTIZATION and not mxfp4_checkpoint(plan):
        words += ["--quantization", QUANTIZATION[req.precision]]
    if req.kv_dtype == "fp8":
        words += ["--kv-cache-dtype", "fp8"]
    if follows_recipe(plan.model, plan.cluster, req.precision, "vllm"):
        words += ["--compilation-config", json.dumps(RECIPE_COMPILATION, separators=(",", ":"))]
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
