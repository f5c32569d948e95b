"""The serving plan and estimate as plain data (pydantic): what ``serve-estimate --json`` prints and
what ``serve-plan -o`` writes (``kind: "serving"``). Nothing here computes; everything that builds,
checks, reports or exports a serving plan imports this module, never the other way round."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SERVING_SCHEMA_VERSION = 1
_PLAIN = ConfigDict(extra="forbid", use_attribute_docstrings=True)

Mode = Literal["aggregated", "disaggregated"]
Role = Literal["aggregated", "prefill", "decode"]


class MemoryGib(BaseModel):
    """One GPU of a worker, GiB."""

    model_config = _PLAIN
    weights: float
    kv_cache: float
    activations_workspace: float
    runtime: float
    capacity: float


class WorkerGroup(BaseModel):
    """Identical workers (engine instances) doing one role."""

    model_config = _PLAIN
    role: Role
    workers: int = Field(gt=0)
    tp: int = Field(gt=0)
    pp: int = Field(gt=0)
    ep: int = Field(gt=0)
    attention_dp: bool
    gpus_per_worker: int = Field(gt=0)
    concurrency_per_worker: int = Field(ge=0)
    """Sequences in flight on one worker (decode and aggregated); prompts batched (prefill)."""
    max_concurrency_per_worker: int = Field(ge=0)
    """Sequences one worker's KV cache holds."""
    memory_gib: MemoryGib


class Deployment(BaseModel):
    """How the GPUs serve: aggregated replicas, or prefill and decode workers."""

    model_config = _PLAIN
    mode: Mode
    gpus: int = Field(gt=0)
    groups: list[WorkerGroup]


class ServeEstimate(BaseModel):
    """The predicted steady state of one deployment (``serve-estimate --json``)."""

    model_config = _PLAIN
    model: str
    cluster: str
    isl: int
    osl: int
    precision: str
    kv_dtype: str
    engine: str
    output_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    ttft_ms: float
    tpot_ms: float
    concurrency: int
    kv_cache_gib: float
    """KV cache per GPU (decode workers)."""
    max_concurrency: int
    """Sequences the deployment's KV caches hold at once."""
    memory_breakdown_gib: dict[str, float]
    """The fullest GPU: weights, kv_cache, activations_workspace, runtime."""
    fits: bool
    shortfall_gib: float
    """GiB per GPU missing for weights + workspace + runtime (0 when they fit)."""
    bottleneck: Literal["compute", "memory bandwidth", "communication"]
    deployment: Deployment
    assumptions: list[str]


class FrontierPoint(BaseModel):
    """One deployment on (or near) the throughput-per-GPU vs tokens-per-user frontier."""

    model_config = _PLAIN
    output_tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    ttft_ms: float
    tpot_ms: float
    meets_targets: bool
    label: str
    """A short name of the deployment (``agg tp4 x2 b64``, ``disagg 2xP(tp2) 3xD(tp4) b128``)."""


class Alternative(BaseModel):
    """A runner-up and why it lost."""

    model_config = _PLAIN
    label: str
    output_tokens_per_s_per_gpu: float
    ttft_ms: float
    tpot_ms: float
    why: str


class SearchInfo(BaseModel):
    """How the search went."""

    model_config = _PLAIN
    wall_time_s: float | None
    """Search wall time; recorded only on request (``timing``), so that the same inputs give
    byte-identical plans."""
    candidates: int
    """Deployments priced."""
    feasible: int
    """Deployments that fit and meet the latency targets."""


class ServingRequest(BaseModel):
    """What was asked (echoed in the plan)."""

    model_config = _PLAIN
    gpus: int
    isl: int
    osl: int
    ttft_ms: float | None
    tpot_ms: float | None
    precision: str
    kv_dtype: str
    engine: str
    disaggregation: Literal["auto", "on", "off"]
    max_batch: int | None = None
    """The cap on sequences per worker the request set (``--max-batch``); None: the engine's own."""


class ServingPlan(BaseModel):
    """A serving plan file (``serve-plan -o serving.json``)."""

    model_config = _PLAIN
    kind: Literal["serving"] = "serving"
    schema_version: int = SERVING_SCHEMA_VERSION
    model: str
    cluster: str
    request: ServingRequest
    estimate: ServeEstimate
    alternatives: list[Alternative]
    frontier: list[FrontierPoint]
    search: SearchInfo
