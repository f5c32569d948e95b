"""``meshplan run`` and ``meshplan check-memory`` build torch modules, so they never build the model a
plan names (issue 13): they take ``--model M`` (checked against the plan's model SHA-256) or an
explicit ``--retrace``; a preset plan needs neither. Refusals are one line, exit 2, with the factory
never imported."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.cli import main
from planner.errors import InputError
from planner.plans.load import load_plan
from planner.plans.named_model import runtime_model
from tests.planner.plans.factory_plans import FACTORY, fixed_plan_file


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the plan's factory file, the plan file); the factory writes ``ran`` beside it when imported.
    ``mine/model.py`` is the same factory in the user's own folder."""
    folder = tmp_path_factory.mktemp("named")
    (folder / "model.py").write_text(FACTORY)
    path = fixed_plan_file(folder, f"{folder / 'model.py'}:make")
    (folder / "ran").unlink()
    (folder / "mine").mkdir()
    (folder / "mine" / "model.py").write_text(FACTORY)
    return folder / "model.py", path


@pytest.mark.parametrize("command", ["run", "check-memory"])
def test_the_factory_a_plan_names_is_never_built_without_model_or_retrace(traced, command: str, capsys: pytest.CaptureFixture) -> None:
    factory, path = traced
    assert main([command, str(path)]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1
    assert "meshplan does not build from a plan: pass --model M" in out.err and "--retrace" in out.err
    assert not factory.with_name("ran").exists()


@pytest.mark.parametrize("command", ["run", "check-memory"])
def test_a_model_that_is_not_the_plans_is_refused_in_one_line(traced, command: str, capsys: pytest.CaptureFixture) -> None:
    factory, path = traced
    other = factory.parent / "mine" / "model.py"
    assert main([command, str(path), "--model", f"{other}:make5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has 7 layers" in err and "but the plan's model" in err
    assert not factory.with_name("ran").exists()


def test_the_users_own_copy_of_the_model_is_accepted_by_its_digest(traced) -> None:
    factory, path = traced
    plan = load_plan(path)
    mine = f"{factory.parent / 'mine' / 'model.py'}:make"
    assert runtime_model(plan, mine) == mine
    assert not factory.with_name("ran").exists()


def test_same_counts_but_other_layers_are_refused_by_the_digest(traced) -> None:
    _, path = traced
    plan = load_plan(path)
    spec = plan.model.spec
    assert spec is not None
    renamed = spec.model_copy(update={"layers": (spec.layers[0].model_copy(update={"name": "other"}), *spec.layers[1:])})
    with pytest.raises(InputError, match="layer count and parameters but not its layers"):
        runtime_model(plan, renamed)


def test_retrace_builds_what_the_plan_names_and_checks_it(traced) -> None:
    factory, path = traced
    plan = load_plan(path)
    assert runtime_model(plan, retrace=True) == plan.model.arg
    assert factory.with_name("ran").exists()
    factory.with_name("ran").unlink()


def test_a_preset_plan_needs_no_model(tmp_path: Path) -> None:
    plan = load_plan(fixed_plan_file(tmp_path, "gpt-1.7b"))
    assert runtime_model(plan) == "gpt-1.7b"
    with pytest.raises(InputError, match="parameters but the plan.s model"):
        runtime_model(plan, "gpt-3.6b")
