"""Plan files are data (issue 13): a plan of a traced model carries its layer list, so reading it
never imports the factory; ``retrace`` is the opt-in; an edited layer list or a tampered plan is
refused by every reader (``load_plan``, ``estimate_plan``, ``export``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.errors import InputError
from planner.plans.load import estimate_plan, load_plan
from planner.plans.named_model import plan_model, spec_digest
from tests.planner.plans.factory_plans import FACTORY, fixed_plan_file


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> tuple[Path, Path]:
    """(factory file, plan file of the traced model); the factory writes ``ran`` when imported."""
    folder = tmp_path_factory.mktemp("traced")
    factory = folder / "model.py"
    factory.write_text(FACTORY)
    path = fixed_plan_file(folder, f"{factory}:make")
    (folder / "ran").unlink()
    return factory, path


def test_reading_a_traced_plan_never_imports_the_factory(traced) -> None:
    factory, path = traced
    factory.with_name("ran").unlink(missing_ok=True)
    plan = load_plan(path)
    assert plan.model.spec is not None and plan.model.spec_sha256 == spec_digest(plan.model.spec)
    assert estimate_plan(path).step_time_s == pytest.approx(plan.estimate.step_time_s, rel=1e-9)
    assert not factory.with_name("ran").exists()


def test_retrace_is_the_opt_in_and_must_give_the_same_model(traced) -> None:
    factory, path = traced
    plan = load_plan(path, retrace=True)
    assert factory.with_name("ran").exists()
    factory.with_name("ran").unlink()
    assert plan_model(plan, retrace=True).layers == plan.model.spec.layers
    factory.with_name("ran").unlink(missing_ok=True)


def test_a_plan_without_its_layer_list_refuses_to_run_the_factory(traced, tmp_path: Path) -> None:
    factory, path = traced
    factory.with_name("ran").unlink(missing_ok=True)
    data = json.loads(path.read_text())
    data["model"]["spec"] = None
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(data))
    with pytest.raises(InputError, match="carries no layer list.*--retrace"):
        load_plan(bare)
    assert not factory.with_name("ran").exists()


def test_an_edited_layer_list_no_longer_matches_its_digest(traced, tmp_path: Path) -> None:
    _, path = traced
    data = json.loads(path.read_text())
    data["model"]["spec"]["layers"][1]["params"] += 1
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    with pytest.raises(InputError, match="spec_sha256"):
        estimate_plan(edited)


def test_a_tampered_plan_is_refused_by_every_reader(traced, tmp_path: Path) -> None:
    from planner.outputs.export import export

    _, path = traced
    data = json.loads(path.read_text())
    data["config"]["dp"] = data["mesh"]["dp"] = 4
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    for read in (load_plan, estimate_plan):
        with pytest.raises(InputError, match="4 != 8 GPUs"):
            read(bad)
    with pytest.raises(InputError):
        export(load_plan(bad), "megatron")


def test_large_searches_get_a_default_time_limit() -> None:
    from planner.plans.build import LARGE_SEARCH_GPUS, LARGE_SEARCH_TIME_LIMIT_S, default_time_limit

    assert default_time_limit(LARGE_SEARCH_GPUS, None) is None
    assert default_time_limit(LARGE_SEARCH_GPUS * 2, None) == LARGE_SEARCH_TIME_LIMIT_S
    assert default_time_limit(LARGE_SEARCH_GPUS * 2, 5.0) == 5.0


def test_the_search_never_proposes_sequence_parallelism_its_validator_refuses() -> None:
    import planner

    plan = planner.plan(model="llama3.1-8b", cluster="dgx-h100", gpus=8, global_batch=8, seq_len=1)  # validated inside
    assert not plan.mesh.sp or (plan.config.seq_len // plan.mesh.cp) % plan.mesh.tp == 0
