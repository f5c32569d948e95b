"""The runs ``meshplan calibrate`` fits on: run records of ``meshplan run`` (JSON,
``planner.runtime.record.RunRecord``) and a CSV of the user's own measured runs.

CSV columns (a header row, any order): ``model``, ``gpus``, ``global_batch``, ``seq_len``,
``step_time_s`` are required; ``tp``, ``pp``, ``cp``, ``vpp``, ``micro_batch``, ``sp``, ``recompute``,
``zero``, ``schedule`` (the ``meshplan estimate`` flags, same defaults), ``peak_memory_gib`` and
``label`` are optional. ``model`` is a preset or a config.json path (a relative path is looked up
beside the CSV first). Neither a record nor a CSV makes meshplan run code: a model factory
(``file.py:fn``) named in one is refused unless ``retrace`` is given (``calibrate --retrace``, only for
files you trust). Both are read through ``planner.intake.jsonio`` (regular files only, at most
16 MiB) and every number must be finite, step times positive.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from costmodel.specs import ClusterSpec, ModelSpec, ParallelConfig
from planner.errors import InputError

REQUIRED = ("model", "gpus", "global_batch", "seq_len", "step_time_s")
"""CSV columns every row needs."""
OPTIONAL = ("tp", "pp", "cp", "vpp", "micro_batch", "sp", "recompute", "zero", "schedule", "peak_memory_gib", "label")
"""CSV columns a row may give."""
_INTS = ("gpus", "global_batch", "seq_len", "tp", "pp", "cp", "vpp", "micro_batch", "zero")


@dataclass(frozen=True)
class Observation:
    """One measured run: what ran and how long its step took."""

    label: str
    """Where it came from: the record's file, or ``file.csv:ROW``."""
    model_arg: str
    model: ModelSpec
    config: ParallelConfig
    step_time_s: float
    """Measured median step time."""
    peak_memory_gib: float | None = None
    """Measured peak memory of the largest rank, when known."""

    @property
    def shape(self) -> str:
        """The model and configuration: runs of the same shape are left out together in cross-validation."""
        from planner.plans.build import summary

        c = self.config
        return f"{self.model_arg} {summary(c)}, global batch {c.global_batch}, seq {c.seq_len}"


class _Models:
    """The models the runs name, each resolved once; factories only with ``retrace``."""

    def __init__(self, retrace: bool) -> None:
        self.retrace = retrace
        self.seen: dict[str, ModelSpec] = {}

    def get(self, arg: str, where: str) -> ModelSpec:
        """The model of ``arg``, named by the file ``where``."""
        from planner.intake.arguments import resolve_model_arg
        from planner.intake.models import names_factory

        if arg not in self.seen:
            if names_factory(arg) and not self.retrace:
                raise InputError(f"{where} names the model factory {arg!r:.80}: data files never make meshplan run code; "
                                 "name a preset or a config.json instead, or pass --retrace (only for files you trust)")
            self.seen[arg] = resolve_model_arg(arg)
        return self.seen[arg]


def load_observations(paths: list[str], cluster: ClusterSpec, retrace: bool = False) -> list[Observation]:
    """Every run in ``paths`` (run-record JSON files and CSV files), checked against ``cluster``.
    ``retrace`` allows building a model from a factory a file names (it imports and runs it)."""
    models = _Models(retrace)
    out: list[Observation] = []
    for path in paths:
        if Path(path).suffix.lower() == ".csv":
            out += _csv_runs(Path(path), cluster, models)
        else:
            out.append(_record_run(Path(path), cluster, models))
    return out


def _record_run(path: Path, cluster: ClusterSpec, models: _Models) -> Observation:
    """One run record, refused when it is not one, or not of its model or of this cluster's hardware."""
    from planner.intake.jsonio import read_json
    from planner.runtime.record import RunRecord

    where = f"run record {path}"
    data = read_json(path, where, "it is not a meshplan run record: give files written by meshplan run -o, or a CSV")
    try:
        record = RunRecord.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "the file"
        raise InputError(f"{path} is not a meshplan run record ({loc}: {first['msg'].lower()}); give files written by meshplan run -o, or a CSV") from None
    if record.model.arg != record.plan.model_arg:
        raise InputError(f"{where}: it trained model '{record.model.arg}' but its plan is for '{record.plan.model_arg}': a record of another model")
    _check_measured(where, record.step_time.median_s, record.peak_memory_gib.measured)
    model = models.get(record.model.arg, where)
    if len(model.layers) != record.model.num_layers:
        raise InputError(f"{where}: model '{record.model.arg}' has {len(model.layers)} layers here but the run trained "
                         f"{record.model.num_layers}: the record is for another model (or the model changed since)")
    ran_on = str(record.plan.cluster.get("gpu", {}).get("name", "?"))
    if ran_on != cluster.gpu.name:
        raise InputError(f"{where} ran on GPU '{ran_on}' (cluster '{record.plan.cluster_name}'), not on the '{cluster.gpu.name}' "
                         f"of cluster '{cluster.name}': calibrate a cluster on runs of its own hardware")
    try:
        config = ParallelConfig.model_validate(record.plan.config)
    except ValidationError as err:
        raise InputError(f"{where}: its plan's config does not validate: {err.errors()[0]['msg']}") from None
    return Observation(str(path), record.model.arg, model, config, record.step_time.median_s, record.peak_memory_gib.measured)


def _check_measured(where: str, step_time_s: float, peak_memory_gib: float | None) -> None:
    """Refuse a step time that is not a finite positive number and a peak memory that is not finite
    and non-negative (NaN would reach the fit's logarithms and the written cluster file)."""
    if not math.isfinite(step_time_s) or step_time_s <= 0:
        raise InputError(f"{where}: step_time_s must be positive and finite (seconds), got {step_time_s!r}")
    if peak_memory_gib is not None and (not math.isfinite(peak_memory_gib) or peak_memory_gib < 0):
        raise InputError(f"{where}: peak_memory_gib must be finite and at least 0 (GiB), got {peak_memory_gib!r}")


def _csv_runs(path: Path, cluster: ClusterSpec, models: _Models) -> list[Observation]:
    """Every row of a runs CSV (see the module doc)."""
    from planner.intake.jsonio import read_text

    text = read_text(path, f"runs CSV {path}", "give a CSV of measured runs")
    try:
        return _csv_rows(path, csv.DictReader(text.splitlines()), cluster, models)
    except csv.Error as err:  # a field over the csv module's limit, a NUL byte, ...
        raise InputError(f"runs CSV {path} is not a CSV of runs ({err}); give a CSV of measured runs") from None


def _csv_rows(path: Path, reader: csv.DictReader, cluster: ClusterSpec, models: _Models) -> list[Observation]:
    """The rows of ``reader`` after its header is checked."""
    header = [h.strip().lower() for h in (reader.fieldnames or [])]
    missing = [c for c in REQUIRED if c not in header]
    unknown = [c for c in header if c not in REQUIRED + OPTIONAL]
    if missing or unknown:
        problems = ([f"missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}"] if missing else []) + (
            [f"unknown column{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}"] if unknown else [])
        raise InputError(f"{path}: {'; '.join(problems)} (needs {', '.join(REQUIRED)}; may have {', '.join(OPTIONAL)})")
    rows = [{k.strip().lower(): (v or "").strip() for k, v in row.items() if k is not None} for row in reader]
    if not rows:
        raise InputError(f"{path}: no runs below the header")
    return [_csv_row(path, i + 2, row, cluster, models) for i, row in enumerate(rows)]


def _csv_row(path: Path, line: int, row: dict[str, str], cluster: ClusterSpec, models: _Models) -> Observation:
    """One CSV row as a validated configuration (``planner.estimation.estimate.build_config``)."""
    from planner.estimation.estimate import build_config

    where = f"{path}:{line}"
    values = {k: _value(k, v, where) for k, v in row.items() if v != ""}
    for column in REQUIRED:
        if column not in values:
            raise InputError(f"{where}: empty '{column}'")
    arg = str(values.pop("model"))
    beside = path.parent / arg
    arg = str(beside) if not Path(arg).is_absolute() and beside.exists() else arg
    model = models.get(arg, where)
    step, memory, label = values.pop("step_time_s"), values.pop("peak_memory_gib", None), values.pop("label", None)
    _check_measured(where, step, memory)
    try:
        config, _ = build_config(model, cluster, values.pop("gpus"), **values)
    except InputError as err:
        raise InputError(f"{where}: {err}") from None
    return Observation(str(label or where), arg, model, config, float(step), None if memory is None else float(memory))


def _value(column: str, text: str, where: str) -> Any:
    """A CSV cell as the type its column needs."""
    try:
        if column in _INTS:
            return _bounded(column, int(text), where)
        if column in ("step_time_s", "peak_memory_gib"):
            return float(text)
    except ValueError:
        raise InputError(f"{where}: column '{column}' must be a number, got '{text}'") from None
    if column == "sp":
        flag = text.lower()
        if flag not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
            raise InputError(f"{where}: column 'sp' must be true or false, got '{text}'")
        return flag in ("true", "1", "yes", "on")
    return text


def _bounded(column: str, value: int, where: str) -> int:
    """``value`` when it lies within ``meshplan plan``'s bounds (``planner.intake.arguments``)."""
    from planner.intake.arguments import MAX_COUNT, MAX_GPUS

    most = MAX_GPUS if column == "gpus" else MAX_COUNT
    if not -1 <= value <= most:
        raise InputError(f"{where}: column '{column}' must be at most {most:,}, got {str(value)[:20]}{'...' if len(str(value)) > 20 else ''}")
    return value


def observation_json(obs: Observation) -> dict[str, Any]:
    """What the calibration block of the output cluster keeps of one run."""
    return {"label": obs.label, "shape": obs.shape, "step_time_s": obs.step_time_s, "peak_memory_gib": obs.peak_memory_gib}


