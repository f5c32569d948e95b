"""What every serving export shares: where each worker's GPUs are, the model's checkpoint name, and
the launch script around the engine-specific commands (every value shell-quoted with ``shlex``)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from planner.errors import InputError
from planner.serving.schema import ServingPlan, WorkerGroup

HF_REPOS = {
    "llama3.1-8b": "meta-llama/Llama-3.1-8B-Instruct", "llama3.1-70b": "meta-llama/Llama-3.1-70B-Instruct",
    "llama3.1-405b": "meta-llama/Llama-3.1-405B-Instruct", "llama3.3-70b": "meta-llama/Llama-3.3-70B-Instruct",
    "llama2-70b": "meta-llama/Llama-2-70b-chat-hf", "mixtral-8x7b": "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "deepseek-v3": "deepseek-ai/DeepSeek-V3", "deepseek-r1": "deepseek-ai/DeepSeek-R1",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B", "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "llama4-maverick": "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
    "llama4-scout": "meta-llama/Llama-4-Scout-17B-16E-Instruct", "gpt-oss-120b": "openai/gpt-oss-120b",
}
"""Hugging Face checkpoints of the presets (a config.json model is served from its folder)."""
BASE_PORT = 8000


@dataclass(frozen=True)
class Worker:
    """One engine process group: its role, index, node and the GPUs it uses there."""

    group: WorkerGroup
    index: int
    node: int
    devices: tuple[int, ...]
    port: int


def mxfp4_checkpoint(plan: ServingPlan) -> bool:
    """The plan serves a weight-only MXFP4 checkpoint (gpt-oss), whose own ``quantization_config``
    the engines read: the exports pass no ``--quantization``, since a method other than the
    checkpoint's ``quant_method`` is refused at load (vLLM ``ModelConfig._verify_quantization``) and
    SGLang 0.4.10's ``--quantization`` has no ``mxfp4`` choice."""
    from profiles.serving import fp4_experts_only

    return plan.request.precision == "fp4" and fp4_experts_only(plan.model)


def checkpoint(plan: ServingPlan) -> str:
    """The checkpoint to serve: the preset's Hugging Face repo, or the config's folder."""
    if plan.model in HF_REPOS:
        return HF_REPOS[plan.model]
    return plan.model[: -len("/config.json")] if plan.model.endswith("/config.json") else plan.model


def workers(plan: ServingPlan, gpus_per_node: int, engine: str, multi_node_ok: bool = False) -> list[Worker]:
    """Workers laid out in order on consecutive GPUs, node by node; an instance that spans nodes is
    refused unless the engine launches multi-node instances (``multi_node_ok``)."""
    out, start, port = [], 0, BASE_PORT
    for group in plan.estimate.deployment.groups:
        g = group.gpus_per_worker
        if g > gpus_per_node and not multi_node_ok:
            raise InputError(f"{engine} cannot launch a {g}-GPU instance across nodes of {gpus_per_node} GPUs "
                             f"from this export; export to sglang, or plan with smaller instances")
        for i in range(group.workers):
            if g <= gpus_per_node and start // gpus_per_node != (start + g - 1) // gpus_per_node:
                start = (start // gpus_per_node + 1) * gpus_per_node  # keep an instance inside one node
            local = start % gpus_per_node
            out.append(Worker(group, i, start // gpus_per_node, tuple(range(local, local + min(g, gpus_per_node))), port))
            start += g
            port += 1
    return out


def env_prefix(worker: Worker) -> str:
    return f"CUDA_VISIBLE_DEVICES={','.join(map(str, worker.devices))}"


def join(words: list[str]) -> str:
    """One shell command line, every word quoted as needed."""
    return " ".join(shlex.quote(w) for w in words)


def script(plan: ServingPlan, engine: str, version: str, lines: list[tuple[Worker, str]], extra: list[str]) -> str:
    """The launch script: a header naming the plan, each worker's command under a comment saying which
    node runs it, then any engine-specific files or router commands (``extra``)."""
    est = plan.estimate
    head = [
        "#!/usr/bin/env bash",
        f"# meshplan serving plan for {engine} {version}: {plan.model} on {est.deployment.gpus} x {plan.cluster}",
        f"# {est.deployment.mode}; predicted {est.output_tokens_per_s_per_gpu:.1f} output tokens/s per GPU, "
        f"TTFT {est.ttft_ms:.1f} ms, TPOT {est.tpot_ms:.1f} ms",
        "# Each worker runs in the background on the node its comment names (run that node's lines there).",
        "set -euo pipefail",
        f"MODEL=${{MODEL:-{shlex.quote(checkpoint(plan))}}}",
        "",
    ]
    body = []
    for worker, line in lines:
        body.append(f"# node {worker.node}: {worker.group.role} worker {worker.index}")
        body.append(line + " &")
    return "\n".join(head + body + ([""] + extra if extra else []) + ["wait"]) + "\n"


def model_word() -> str:
    """The placeholder the commands use for the checkpoint (expanded by the shell from ``MODEL``)."""
    return "__MODEL__"


def finish(line: str) -> str:
    """Put the shell's "$MODEL" where :func:`model_word` stands (left unquoted by shlex on purpose)."""
    return line.replace(model_word(), '"$MODEL"')
