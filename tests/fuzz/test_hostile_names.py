"""Names that try to become code. A plan whose free text holds a line break or a control character is
refused by every command that reads it; printable names full of shell and Python syntax are exported
for every target, and the result passes its syntax check (``bash -n``, ``compile``) and runs nothing
but the launch: the Megatron launcher runs under a stub ``torchrun`` that records its call, the
torchtitan module holds only imports and one function, and the name appears in comments only. The
exporters escape comment text themselves too (plans built in memory skip the validator).
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import subprocess
import tokenize
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzkit import FUZZ, assert_refused, log_case, refused_everywhere

BREAKS = ["llama\ntouch PWNED\n#", "x\r\ntouch PWNED", "x\x00y", "x\u2028import os", "\x1b[2J", "a" * 300]
PRINTABLE = ["llama $(touch PWNED) `touch PWNED`", "'; touch PWNED; '", '"""; import os; os.system("touch PWNED") #',
             "\\\\ \\n x # ```  <b>*x*</b> | [a](b)", "llama; touch PWNED &", "${IFS}touch${IFS}PWNED"]
FIELDS = (("model", "name"), ("cluster", "name"), ("cluster", "gpu", "name"), ("model", "source"), ("model", "layer_names", 0))


def _with(plan: dict, field: tuple, value: str) -> dict:
    out = json.loads(json.dumps(plan))
    node = out
    for key in field[:-1]:
        node = node[key]
    node[field[-1]] = value
    return out


@settings(FUZZ, max_examples=12)
@given(field=st.sampled_from(FIELDS), value=st.sampled_from(BREAKS))
def test_text_with_line_breaks_is_refused_everywhere(tmp_path_factory, good_plan, field, value) -> None:
    path = tmp_path_factory.mktemp("names") / "plan.json"
    path.write_text(json.dumps(_with(good_plan, field, value)), encoding="utf-8")
    refused_everywhere(str(path))
    assert_refused("check-memory", str(path))
    assert not Path("PWNED").exists()


def _launch_megatron(script: Path, folder: Path) -> list[str]:
    """Run the launcher under a stub torchrun on PATH; return the stub's argv lines."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    stub = bin_dir / "torchrun"
    stub.write_text('#!/bin/sh\necho "$@" >> "$CALLS"\n', encoding="utf-8")
    stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(folder / "calls.txt")}
    subprocess.run(["bash", str(script)], cwd=folder, env=env, check=True, timeout=20, capture_output=True)
    return (folder / "calls.txt").read_text(encoding="utf-8").splitlines()


def _python_runs_nothing(text: str, name: str) -> None:
    """The module compiles, holds imports, a docstring and function definitions only, and ``name``
    (when non-empty) shows up in comments alone."""
    tree = ast.parse(compile(text, "meshplan_job.py", "exec", ast.PyCF_ONLY_AST))
    assert all(isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef)) or (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
               for n in tree.body), "the module runs top-level code"
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if name and token.type != tokenize.COMMENT:
            assert name not in token.string, f"the name left a comment: {token}"


def _check_export(text: str, target: str, name: str, folder: Path) -> None:
    if target == "megatron":
        script = folder / "launch.sh"
        script.write_text(text, encoding="utf-8")
        subprocess.run(["bash", "-n", str(script)], check=True, timeout=20)
        calls = _launch_megatron(script, folder)
        assert len(calls) == 1 and "pretrain_gpt.py" in calls[0], calls
    elif target == "torchtitan":
        _python_runs_nothing(text, name)
    else:
        json.loads(text)
    assert not (folder / "PWNED").exists() and not Path("PWNED").exists(), "a name ran as code"


@pytest.fixture(scope="module")
def target_plans(tiny_dir: Path) -> dict[str, dict]:
    """A plan of the tiny model for each target, as ``meshplan plan --target T`` writes it."""
    from fuzzkit import run_cli

    out = {}
    for target in ("megatron", "torchtitan", "deepspeed"):
        path = tiny_dir / f"plan_{target}.json"
        code, _, err = run_cli("plan", "--model", str(tiny_dir / "tiny" / "config.json"), "--cluster", str(tiny_dir / "cpu.json"),
                               "--gpus", "2", "--global-batch", "8", "--seq-len", "32", "--target", target, "-o", str(path))
        assert code == 0, err
        out[target] = json.loads(path.read_text(encoding="utf-8"))
    return out


@pytest.mark.parametrize("target", ["megatron", "torchtitan", "deepspeed"])
@pytest.mark.parametrize("value", PRINTABLE)
def test_printable_hostile_names_export_as_text_only(tmp_path, target_plans, value, target) -> None:
    """Through the command line: the plan validates, and the export is quoted."""
    from fuzzkit import run_cli

    plan = _with(_with(target_plans[target], ("model", "name"), value), ("cluster", "name"), value)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan), encoding="utf-8")
    code, out, err = run_cli("export", str(path), "--to", target, "-o", str(tmp_path / "out"))
    assert code == 0, err
    _check_export((tmp_path / "out").read_text(encoding="utf-8"), target, value, tmp_path)
    code, out, err = run_cli("report", str(path), "--format", "md")
    prose = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1$", "", out)  # outside code blocks, text is escaped
    assert code == 0 and "<b>" not in prose and "](b)" not in prose.replace("\\](b)", ""), err


@pytest.mark.parametrize("target", ["megatron", "torchtitan", "deepspeed"])
@pytest.mark.parametrize("value", BREAKS[:4])
def test_exporters_escape_line_breaks_themselves(tmp_path, target_plans, value, target) -> None:
    """Past the validator (a plan built in memory), a line break still cannot leave a comment."""
    from planner.outputs.export import text_of
    from planner.plans.engines.engines import engine_export
    from planner.plans.named_model import plan_model
    from planner.plans.schema import Plan

    log_case("export")
    plan = Plan.model_validate(_with(_with(target_plans[target], ("model", "name"), value), ("cluster", "name"), value))
    text = text_of(engine_export(plan, target, plan_model(plan)), target)
    _check_export(text, target, "", tmp_path)
    if target != "deepspeed":
        assert not any(line.startswith("touch") or line.startswith("import os") for line in text.splitlines())
