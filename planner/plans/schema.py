"""The plan JSON: what ``meshplan plan`` writes and every other command reads (DESIGN.md contract).

Readable and diffable: lists are JSON arrays, enums are lowercase strings as the ecosystem spells
them, units are in field names. ``schema_version`` changes whenever a field changes meaning; the
committed JSON Schema (``planner/plans/plan.schema.json``) and its snapshot test guard the shape.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from costmodel.specs import ClusterSpec, ModelSpec, ParallelConfig, Precision
from planner.plans.constraints import PlanConstraints
from planner.estimation.result import EstimateResult
from planner.plans.hetero.schema import HeteroInfo

SCHEMA_VERSION = "1.1"
"""Version of the plan layout; ``planner.load_plan`` refuses any other."""

Target = Literal["native", "megatron", "torchtitan", "deepspeed"]
SolverStatus = Literal["optimal", "feasible", "timeout"]
_PLAN = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class ModelInfo(BaseModel):
    """The model as given, and the facts a reviewer checks first."""

    model_config = _PLAN
    arg: str
    """How the model was named: a preset, a config.json path or a factory."""
    trace: bool = False
    """The config.json was built with transformers and traced (``--trace``)."""
    name: str
    num_layers: int
    """Entries of the model's ordered layer list (embedding, blocks, norm, head)."""
    layer_names: list[str]
    params: int
    source: str
    spec: ModelSpec | None = None
    """The model's layer list as planned, for every model that is not a preset (traced factories,
    config.json files): validate, estimate, report and export read it and never rebuild the model
    from ``arg`` (reading a plan runs no code it names; ``--retrace`` opts in to rebuilding)."""
    spec_sha256: str | None = None
    """SHA-256 of the model's layer list in canonical JSON (``planner.plans.named_model.spec_digest``): a
    preset or a re-traced model must still hash to it, and an edited ``spec`` no longer does."""


class RequestInfo(BaseModel):
    """What was asked for."""

    model_config = _PLAN
    gpus: int
    global_batch: int
    seq_len: int
    target: Target
    precision: Precision = "bf16"
    """GEMM precision asked for (``plan --precision``); the chosen one is ``config.precision``."""
    top_k: int
    time_limit_s: float | None
    constraints: PlanConstraints | None = None
    """Dimensions the user fixed or bounded (``planner.plans.constraints``); None when all were searched."""


class Mesh(BaseModel):
    """Job-level degrees: dp x tp x pp x cp = GPUs; ep is carved out of dp x cp for expert layers."""

    model_config = _PLAN
    dp: int
    tp: int
    pp: int
    cp: int
    ep: int
    sp: bool
    zero: int
    """0 none, 1 optimizer states (distributed optimizer), 2 + gradients, 3 + parameters (FSDP)."""
    rank_order: str = "tp-cp-ep-dp-pp"
    """Fastest-varying first (Megatron ``parallel_state``): TP stays inside a node."""
    gpus_per_node: int
    nodes: int


class ScheduleInfo(BaseModel):
    """The pipeline schedule and batch split."""

    model_config = _PLAN
    name: Literal["1f1b", "interleaved-1f1b", "gpipe", "zb-h1"]
    virtual_stages: int
    """Model chunks per pipeline rank (1 unless interleaved)."""
    micro_batch: int
    num_microbatches: int
    global_batch: int


class Stage(BaseModel):
    """One model chunk: its layers (indices into the model's layer list), where it runs, its cost."""

    model_config = _PLAN
    index: int
    """Chunk index k: virtual chunk k // pp of pipeline rank k % pp."""
    pp_rank: int
    virtual_chunk: int
    layers: list[int]
    layer_recompute: list[Literal["none", "selective", "full"]]
    """Recomputation of each layer of ``layers``, in the same order."""
    ranks: list[int]
    """[first, last] global ranks of the GPUs running this stage (tp x cp x dp of them)."""
    nodes: list[int]
    """[first, last] node indices those ranks occupy."""
    time_per_microbatch_s: float
    """Forward + backward + recompute + exposed communication of the whole pipeline rank."""
    memory_gib: float
    """Peak memory of the pipeline rank's GPUs."""


class Alternative(BaseModel):
    """A runner-up configuration and why it lost."""

    model_config = _PLAN
    rank: int
    summary: str
    config: dict[str, Any]
    step_time_s: float
    peak_memory_gib: float
    fits: bool
    why_lost: str


class SearchInfo(BaseModel):
    """How the plan was found and how sure the search is."""

    model_config = _PLAN
    wall_time_s: float | None
    """Search wall time; recorded only on request (``--timing``), so that the same inputs give
    byte-identical plans by default."""
    candidates_evaluated: int
    candidates_pruned: int
    solver: str
    status: SolverStatus
    optimality_gap: float = Field(ge=0)
    """Relative gap between the plan and the best lower bound left unexplored (0 = proven)."""
    time_limit_s: float | None


class Plan(BaseModel):
    """A parallelization plan."""

    model_config = _PLAN
    schema_version: str = SCHEMA_VERSION
    planner_version: str
    model: ModelInfo
    cluster: ClusterSpec
    request: RequestInfo
    mesh: Mesh
    schedule: ScheduleInfo
    stages: list[Stage]
    config: ParallelConfig
    """The exact configuration estimated (``meshplan estimate --plan`` re-runs it)."""
    estimate: EstimateResult
    alternatives: list[Alternative]
    search: SearchInfo
    hetero: HeteroInfo | None = None
    """Mixed or degraded cluster only (``planner.plans.hetero.schema``): each replica's and stage's GPU
    group, speed, share and gradient weight; absent from homogeneous plans' JSON."""

    def to_json(self) -> str:
        """Deterministic JSON text (same plan, same bytes); a homogeneous plan has no ``hetero`` key."""
        return self.model_dump_json(indent=2, exclude={"hetero"} if self.hetero is None else None) + "\n"

