"""resolve_model: presets, config files, factories (error path only), suggestions; model_summary."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import planner.intake.models as models
from planner.errors import InputError

REPO = Path(__file__).resolve().parents[4]


def error_of(arg: str) -> str:
    with pytest.raises(InputError) as info:
        models.resolve_model(arg)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_preset_names_are_case_insensitive() -> None:
    spec = models.resolve_model("  Llama3.1-8B ")
    assert spec.name == "llama3.1-8b"
    assert models.count_params(spec) == 8_030_261_248


def test_unknown_preset_suggests_close_names() -> None:
    message = error_of("llama3-8b")
    assert message.startswith("unknown model 'llama3-8b'; did you mean llama3.1-8b")
    assert message.endswith("? (meshplan list models)")
    assert "did you mean mixtral-8x7b? (meshplan list models)" in error_of("mixtral")


def test_unknown_name_without_close_match() -> None:
    message = error_of("zzzz")
    assert "did you mean" not in message and "meshplan list models" in message


def test_config_json_path_and_folder(tmp_path: Path) -> None:
    config = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    spec = models.resolve_model(str(path))
    assert spec.source == str(path)
    assert models.resolve_model(str(tmp_path)).layers == spec.layers


def test_missing_json_path() -> None:
    assert "cannot read model config" in error_of("/no/such/dir/config.json")


def test_factory_with_missing_module_or_file() -> None:
    assert "cannot be imported" in error_of("no_such_package_xyz.models:build")
    assert "not found" in error_of("/no/such/model.py:build")


def test_python_file_without_factory_name(tmp_path: Path) -> None:
    script = tmp_path / "model.py"
    script.write_text("")
    assert "names no factory" in error_of(str(script))


def test_model_summary_moe() -> None:
    summary = models.model_summary(models.resolve_model("mixtral-8x7b"))
    assert summary["name"] == "mixtral-8x7b"
    assert (summary["layers"], summary["hidden_size"], summary["num_heads"]) == (32, 4096, 32)
    assert summary["num_kv_heads"] == 8 and summary["ffn_hidden_size"] == 14336
    assert summary["vocab_size"] == 32000
    assert (summary["num_experts"], summary["moe_top_k"]) == (8, 2)
    assert (summary["total_params"], summary["active_params"]) == (46_702_792_704, 12_879_925_248)


def test_preset_resolution_is_fast() -> None:
    models.resolve_model("llama3.1-405b")  # warm up
    timings = []
    for _ in range(5):
        start = time.perf_counter()
        models.resolve_model("llama3.1-405b")
        timings.append(time.perf_counter() - start)
    assert sorted(timings)[2] < 0.05


def test_presets_and_configs_never_import_torch_or_pulp() -> None:
    code = (
        "import sys, planner.intake.models as m\n"
        "m.resolve_model('mixtral-8x7b')\n"
        "try:\n    m.resolve_model('no_such_package_xyz.models:build')\n"
        "except Exception:\n    pass\n"
        "print(sorted(k for k in ('torch', 'pulp') if k in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
