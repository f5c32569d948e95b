"""The run record: what ``meshplan run`` measured, beside what the plan predicted.

One JSON object per run, written by rank 0 (``meshplan run ... -o run.json``) and read by the
calibration work (``meshplan calibrate``). Field names are stable: later versions only add fields;
``schema_version`` changes if a field ever changes meaning. :func:`run_record_schema` gives the JSON
Schema (pydantic's ``model_json_schema``).

Errors are relative: ``(measured - predicted) / predicted`` (positive = slower / bigger than
predicted); None when either side is missing or the prediction is zero.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.runtime.rank_times import RankTime

RECORD_SCHEMA_VERSION = "1.1"
"""Version of the run-record layout."""

_RECORD = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class PlanSummary(BaseModel):
    """The plan that ran: enough to re-estimate it (``planner.estimation.result.estimate_config``)."""

    model_config = _RECORD
    summary: str
    """One line naming the configuration (``planner.plans.build.summary``)."""
    model_arg: str
    """The plan's ``model.arg`` (preset, config.json path or factory)."""
    cluster_name: str
    cluster: dict[str, Any]
    """The plan's cluster (``ClusterSpec`` as JSON), as the prediction used it."""
    gpus: int
    global_batch: int
    seq_len: int
    micro_batch: int
    num_microbatches: int
    schedule: str
    virtual_stages: int
    mesh: dict[str, Any]
    """The plan's mesh: dp, tp, pp, cp, ep, sp, zero, rank_order."""
    stage_layers: list[list[int]]
    """Layer indices of each pipeline chunk, chunk order."""
    config: dict[str, Any]
    """The exact ``ParallelConfig`` estimated (JSON)."""
    estimate: dict[str, Any]
    """The plan's full ``estimate`` object (the ``meshplan estimate --json`` keys)."""


class ModelRun(BaseModel):
    """The model that was trained."""

    model_config = _RECORD
    arg: str
    """``--model`` as given."""
    name: str
    num_layers: int
    """Entries of the plan's ordered layer list (embedding, blocks, norm, head)."""
    params: int
    """Parameters of the unsplit torch module (counted on every rank before sharding)."""
    dtype: str


class Environment(BaseModel):
    """Where it ran."""

    model_config = _RECORD
    torch_version: str
    python_version: str
    platform: str
    backend: str
    """torch.distributed backend (``gloo``, ``nccl``)."""
    device_type: Literal["cpu", "cuda"]
    device_names: list[str]
    """Device name of every rank, rank order (CPU: the processor name)."""
    cuda_version: str | None = None
    hostnames: list[str]


class Training(BaseModel):
    """How the steps ran: dtypes, kernels, compile and fp8 (``planner.runtime.precision``)."""

    model_config = _RECORD
    compute_dtype: str
    """Dtype of the forward and backward (FSDP2's ``param_dtype``): ``bfloat16`` or ``float32``."""
    master_dtype: str
    """Dtype of the parameters the optimizer updates and of its states."""
    reduce_dtype: str
    """Dtype gradients are reduced in across data-parallel ranks."""
    precision_reason: str
    """Why the compute dtype is what it is (a CPU without native bf16 keeps fp32)."""
    optimizer: str
    """The optimizer and its implementation (fused on CUDA)."""
    attention: str
    """The attention call and the SDPA backends it may use."""
    compile: bool
    """Transformer blocks ran under ``torch.compile`` (the plan's ``config.compile``)."""
    compiled_blocks: int
    """How many blocks (on this rank 0) were compiled."""
    fp8: bool
    """Linear layers trained in Float8 (torchao, the plan's ``config.precision``)."""
    fp8_recipe: str | None = None
    startup_s: float | None = None
    """Seconds from the process's start to the start of the first training step (rank 0)."""


class Comparison(BaseModel):
    """One measured quantity with the plan's prediction and the relative error."""

    model_config = _RECORD
    measured: float | None
    predicted: float | None
    error: float | None
    """(measured - predicted) / predicted; None when either is missing."""


class StepTimeStats(BaseModel):
    """Step times after warm-up, seconds."""

    model_config = _RECORD
    median_s: float
    min_s: float
    max_s: float
    spread: float
    """(max - min) / median over the timed steps."""
    timed_steps: int
    warmup_steps: int
    all_steps_s: list[float]
    """Every step's wall time, warm-up included (rank 0, between barriers)."""


class RankMemory(BaseModel):
    """Peak memory of one rank, GiB, with the plan's prediction for its pipeline rank."""

    model_config = _RECORD
    rank: int
    pp_rank: int
    source: str
    """Which tool measured it: ``torch.cuda.max_memory_allocated/reserved`` or
    ``torch.distributed._tools.mem_tracker`` (CPU: tensors alive at the peak) plus process RSS."""
    peak_allocated_gib: float
    peak_reserved_gib: float | None
    """CUDA caching-allocator reserved peak; on CPU the process's peak RSS (``resource.getrusage``)."""
    predicted_gib: float | None
    error: float | None
    """(peak_allocated - predicted) / predicted."""


class RunRecord(BaseModel):
    """A measured run of a plan (``meshplan run``)."""

    model_config = _RECORD
    schema_version: str = RECORD_SCHEMA_VERSION
    plan: PlanSummary
    model: ModelRun
    world_size: int
    env: Environment
    seed: int
    steps: int
    warmup: int
    losses: list[float]
    """Training loss of every step (mean over the global batch), warm-up included."""
    step_time: StepTimeStats
    step_time_s: Comparison
    """Median step time after warm-up vs the plan's ``estimate.step_time_s``."""
    tokens_per_s: Comparison
    mfu: Comparison
    """Model FLOPs (``costmodel.flops.model_flops_per_step``) / (world x median step time x the
    plan cluster's GPU peak); on CPU the peak is still the plan's GPU, so it only compares runs."""
    peak_memory_gib: Comparison
    """Largest rank's peak allocated memory vs the plan's ``estimate.peak_memory_gib``."""
    memory: list[RankMemory] = Field(default_factory=list)
    training: Training | None = None
    """Dtypes, attention, compile and fp8 of the run (``meshplan run``; None in share runs' records)."""
    notes: list[str] = Field(default_factory=list)
    """What the reader must know (CPU peak is the plan's GPU, weights from seed, ...)."""
    rank_times: list[RankTime] | None = None
    """Per-rank compute, injected wait and sync seconds (runs of uneven shares or injected slowdowns;
    ``planner.runtime.rank_times``); absent from other records' JSON."""

    def to_json(self) -> str:
        """Deterministic JSON text (no ``rank_times`` key when the run did not measure them, and no
        pipeline keys in them without pipelining)."""
        exclude: dict[str, Any] = {} if self.training is not None else {"training": True}
        if self.rank_times is None:
            return self.model_dump_json(indent=2, exclude={**exclude, "rank_times": True}) + "\n"
        absent = {k for k in RankTime.OPTIONAL if all(getattr(r, k) is None for r in self.rank_times)}
        if absent:
            exclude["rank_times"] = {"__all__": absent}
        return self.model_dump_json(indent=2, exclude=exclude or None) + "\n"


def compare(measured: float | None, predicted: float | None) -> Comparison:
    """A :class:`Comparison` with its relative error."""
    error = None
    if measured is not None and predicted:
        error = (measured - predicted) / predicted
    return Comparison(measured=measured, predicted=predicted, error=error)


def run_record_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`RunRecord`."""
    return RunRecord.model_json_schema()
