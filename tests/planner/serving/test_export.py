"""Serving exports checked against the flag tables of the released engines, and run through bash with
stub engines so that the words each engine would receive are the ones checked (quoting included)."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from planner.errors import InputError
from planner.serving.export import export_serving
from planner.serving.export.flags import TABLES, check_command
from planner.serving.schema import ServingPlan

ENGINES = ("vllm", "sglang", "trtllm")
STUBS = """
log() { local IFS=$'\\x1f'; printf '%s\\n' "$*" >> "$LOG"; }  # one write per call: servers start in the background
vllm() { log vllm "$@"; }
python() { log python "$@"; }
trtllm-serve() { log trtllm-serve "$@"; }
"""


def _argv_lines(script: str, tmp_path) -> list[list[str]]:
    """Run the launch script with stub engines; the argv of every engine call."""
    log = tmp_path / "argv.log"
    log.write_text("")
    proc = subprocess.run(["bash", "-c", STUBS + "\nsource \"$0\"", str(_write(tmp_path, script))], cwd=tmp_path,
                          env={"LOG": str(log), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [line.rstrip("\x1f").split("\x1f") for line in log.read_text().splitlines() if line]


def _write(tmp_path, script: str):
    path = tmp_path / "launch.sh"
    path.write_text(script)
    return path


def _check_argv(engine: str, argv: list[str]) -> list[str]:
    return check_command(engine, shlex.join(argv))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("which", ["llama_serving_plan", "llama_aggregated_plan", "moe_plan"])
def test_every_launch_uses_only_the_engines_flags(engine: str, which: str, request, tmp_path) -> None:
    plan: ServingPlan = request.getfixturevalue(which)
    script = export_serving(plan, engine, 8)
    calls = _argv_lines(script, tmp_path)
    servers = [c for c in calls if c[:len(TABLES[engine].program)] == list(TABLES[engine].program)
               and c[1:2] != ["disaggregated"]]
    if engine == "trtllm" and plan.estimate.deployment.mode == "disaggregated":
        assert ["trtllm-serve", "disaggregated", "-c", "disagg-config.yaml"] in calls
        config = (tmp_path / "disagg-config.yaml").read_text()
        assert "context_servers:" in config and "generation_servers:" in config
    workers = sum(g.workers for g in plan.estimate.deployment.groups)
    assert len(servers) == workers
    for argv in servers:
        assert _check_argv(engine, argv) == [], argv
    model = [a for a in servers[0] if "/" in a and not a.startswith("-")]
    assert model and model[0].startswith(("meta-llama/", "Qwen/"))


def test_parallel_degrees_reach_the_command(moe_plan: ServingPlan, tmp_path) -> None:
    group = moe_plan.estimate.deployment.groups[0]
    calls = _argv_lines(export_serving(moe_plan, "trtllm", 8), tmp_path)
    argv = calls[0]
    assert argv[argv.index("--tp_size") + 1] == str(group.tp)
    assert argv[argv.index("--ep_size") + 1] == str(group.ep)
    yaml = (tmp_path / "extra-llm-api-aggregated.yaml").read_text()
    assert f"enable_attention_dp: {'true' if group.attention_dp else 'false'}" in yaml


def test_a_model_path_with_spaces_and_quotes_survives_the_shell(llama_aggregated_plan: ServingPlan, tmp_path) -> None:
    odd = "/models/my llama's \"70b\"/config.json"
    plan = llama_aggregated_plan.model_copy(update={"model": odd})
    for engine in ENGINES:
        calls = _argv_lines(export_serving(plan, engine, 8), tmp_path)
        assert "/models/my llama's \"70b\"" in calls[0]


def test_the_checker_can_fail() -> None:
    assert check_command("vllm", "vllm serve m --tensor-parallel-size 2 --tp-size 2")
    assert check_command("vllm", "vllm serve m --kv-cache-dtype fp4")
    assert check_command("sglang", "python -m sglang.launch_server --model-path m --tp-size two")
    assert check_command("trtllm", "trtllm-serve m --backend tensorrt")
    assert check_command("trtllm", "vllm serve m")


def test_vllm_refuses_an_instance_wider_than_a_node(llama_aggregated_plan: ServingPlan) -> None:
    with pytest.raises(InputError, match="across nodes"):
        export_serving(llama_aggregated_plan, "vllm", 1)


def test_unknown_target_is_refused(llama_aggregated_plan: ServingPlan) -> None:
    with pytest.raises(InputError, match="unknown serving export target"):
        export_serving(llama_aggregated_plan, "tgi", 8)


def test_flag_tables_name_their_release() -> None:
    for table in TABLES.values():
        assert f"v{table.version}" in table.source
