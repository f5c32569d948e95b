"""The serving engine's host work per step, which bounds a large decode batch.

An engine's executor loop does per-request bookkeeping on the CPU every step (scheduling, KV block
accounting, appending the sampled token, stop checks, responses). With an overlap scheduler that work
runs while the GPU executes the previous step, so a step lasts the longer of the two (TensorRT-LLM
PyTorch backend, ``PyExecutor._executor_loop_overlap``: the next batch is prepared and launched
before the previous batch's ``_update_requests``; docs ``torch/features/overlap_scheduler.md``). The
host side grows with the requests a rank holds, the GPU side mostly with the weights and KV bytes, so
at large batches the host side wins (NVIDIA/TensorRT-LLM PR 9703: batches not eligible for CUDA
graphs and "not large enough to hide host overhead"; PR 16564: the per-request Python loop of
``TorchSampler.update_requests`` dominates the per-iteration bubble of a 256-request gpt-oss-120b
batch).
"""

from __future__ import annotations

from costmodel.serving.engines import EngineDefaults
from costmodel.serving.specs import Instance


def requests_per_rank(instance: Instance, batch: float) -> float:
    """Requests one rank's executor loop walks every step: all of them under tensor parallelism
    (every TP rank runs the same loop over the whole batch), 1/tp of them under attention data
    parallelism (each rank schedules its own requests)."""
    return batch / instance.tp if instance.attention_dp else batch


def host_step_seconds(engine: EngineDefaults, instance: Instance, batch: float) -> float:
    """Seconds of host work per decode step for ``batch`` sequences in flight on one instance:
    the engine's measured host time per request per step (``EngineDefaults.host_us_per_request``)
    times the requests one rank holds; 0 for an engine without a published figure."""
    return requests_per_rank(instance, batch) * engine.host_us_per_request * 1e-6


def token_seconds(gpu_cycle: float, osl: int, host_step: float) -> float:
    """Seconds between two tokens of a sequence: the GPU's share per step of a whole request cycle
    (``gpu_cycle`` / osl: every decode step plus its share of the prefills), or the host's step
    time where the host is slower (overlap scheduler: the step is the longer of the two)."""
    return max(gpu_cycle / osl, host_step)
