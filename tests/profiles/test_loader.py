"""profiles.loader: presets by name, cluster files, GPU lookup, and the one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from profiles import (
    ProfileError,
    cluster_for_gpu,
    cluster_sources,
    gpu_sources,
    list_clusters,
    list_gpus,
    load_cluster,
    load_gpu,
)

REPO = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, data: Any, name: str = "mycluster.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8")
    return path


def _by_name_entry(**changes: Any) -> dict[str, Any]:
    """A small cluster file that names its GPU and gives only the link-side efficiencies."""
    entry: dict[str, Any] = {
        "gpu": "h100-sxm",
        "gpus_per_node": 4,
        "intra_node_bandwidth_gbps": 450,
        "network_bandwidth_gbps": 25,
        "intra_node_latency_us": 2.0,
        "network_latency_us": 5.0,
        "efficiency": {"intra_node": 0.7, "network": 0.8},
    }
    entry.update(changes)
    return entry


def _error(arg: object) -> str:
    """The message of the ProfileError that load_cluster raises, checked to be one line."""
    with pytest.raises(ProfileError) as caught:
        load_cluster(arg)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "\n" not in message and message
    return message


@pytest.mark.parametrize("cluster", list_clusters(), ids=lambda c: c.name)
def test_every_preset_loads_by_name_in_any_case(cluster: Any) -> None:
    assert load_cluster(cluster.name) == cluster
    assert load_cluster(cluster.name.upper()) == cluster
    assert load_cluster(cluster.name.replace("-", "_")) == cluster


@pytest.mark.parametrize("cluster", list_clusters(), ids=lambda c: c.name)
def test_a_dumped_preset_round_trips_through_a_file(tmp_path: Path, cluster: Any) -> None:
    path = _write(tmp_path, cluster.model_dump())
    assert load_cluster(str(path)) == cluster
    assert load_cluster(path) == cluster


def test_a_file_may_name_its_gpu_and_inherit_its_compute_efficiencies(tmp_path: Path) -> None:
    path = _write(tmp_path, _by_name_entry(gpu="H100"))
    spec = load_cluster(str(path))
    h100 = load_cluster("dgx-h100")
    assert spec.name == "mycluster"
    assert spec.gpu == load_gpu("h100-sxm")
    assert spec.gpus_per_node == 4
    assert spec.efficiency.gemm_max == h100.efficiency.gemm_max
    assert spec.efficiency.attention == h100.efficiency.attention
    assert (spec.efficiency.intra_node, spec.efficiency.network) == (0.7, 0.8)
    assert str(path) in spec.source


def test_a_file_may_override_gpu_efficiencies_and_carry_its_own_name_and_sources(tmp_path: Path) -> None:
    entry = _by_name_entry(name="lab", source="our lab")
    entry["efficiency"] = {**entry["efficiency"], "gemm_max": 0.7}
    entry["sources"] = {"efficiency.gemm_max": "measured with mamf-finder on our nodes"}
    path = _write(tmp_path, entry)
    spec = load_cluster(str(path))
    assert (spec.name, spec.source, spec.efficiency.gemm_max) == ("lab", "our lab", 0.7)
    sources = cluster_sources(str(path))
    assert sources["efficiency.gemm_max"] == "measured with mamf-finder on our nodes"
    assert "efficiency.attention" in sources  # still the GPU's citation


def test_an_overridden_efficiency_loses_the_gpu_citation(tmp_path: Path) -> None:
    entry = _by_name_entry()
    entry["efficiency"] = {**entry["efficiency"], "memory": 0.7}
    assert "efficiency.memory" not in cluster_sources(str(_write(tmp_path, entry)))


def test_a_file_named_like_a_preset_is_read_as_a_file(tmp_path: Path) -> None:
    path = _write(tmp_path, _by_name_entry(), name="dgx-h100.json")
    assert load_cluster(str(path)).gpus_per_node == 4


def test_an_existing_path_without_json_suffix_is_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, _by_name_entry(), name="labcluster")
    monkeypatch.chdir(tmp_path)
    assert load_cluster("labcluster").name == "labcluster"


def test_gpu_lookup_accepts_aliases_and_device_names() -> None:
    h100 = load_gpu("h100-sxm")
    assert load_gpu("H100") == h100
    assert load_gpu("NVIDIA H100 80GB HBM3") == h100
    assert load_gpu("nvidia a100-sxm4-80gb") == load_gpu("a100-80gb")
    assert [gpu.name for gpu in list_gpus()][:3] == ["v100-sxm2-32gb", "a100-40gb", "a100-80gb"]


def test_every_gpu_states_its_tdp_with_a_source() -> None:
    """The sweep's energy figure reads the profile's TDP (``planner.capacity.economics``)."""
    for gpu in list_gpus():
        assert gpu.tdp_w is not None and gpu.tdp_w > 0, gpu.name
        assert f"{gpu.tdp_w:g} W" in gpu_sources(gpu.name)["tdp_w"], gpu.name


def test_cluster_for_gpu_gives_the_default_node() -> None:
    assert cluster_for_gpu("h100").name == "dgx-h100"
    assert cluster_for_gpu("a100-80gb").name == "dgx-a100"
    assert cluster_for_gpu("mi300x").name == "mi300x-8"


def test_unknown_preset_suggests_names_and_the_list_command() -> None:
    message = _error("dgx-h1000")
    assert "unknown cluster preset 'dgx-h1000'" in message
    assert "dgx-h100" in message and "meshplan list clusters" in message


def test_unknown_gpu_suggests_names() -> None:
    with pytest.raises(ProfileError, match=r"unknown GPU 'mi300'.*mi300x.*meshplan list gpus"):
        load_gpu("mi300")
    with pytest.raises(ProfileError, match="unknown GPU 'tpu-v4'"):
        cluster_for_gpu("tpu-v4")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "is not valid JSON (Expecting property name enclosed in double quotes at line 1, column 2); fix the file"),
        ("[1, 2]", "the entry must be a JSON object, got an array"),
        (b"\xff\xfe{}", "is not UTF-8 text"),
        ("[" * 100_000 + "]" * 100_000, "nests 100000 levels deep (at most 64)"),
        ('{"gpu": "a100", "x": NaN}', "holds NaN, which is not JSON"),
    ],
)
def test_unparseable_files_are_named(tmp_path: Path, content: str | bytes, expected: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    message = _error(str(path))
    assert expected in message and str(path) in message


def test_unreadable_files_are_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    assert _error(str(missing)) == f"cannot read cluster file '{missing}': No such file or directory; check the path"
    folder = tmp_path / "folder.json"
    folder.mkdir()
    assert _error(str(folder)).startswith(f"cluster file '{folder}' is a directory, not a regular file")


def test_a_file_over_the_cap_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text('{"about": "' + "x" * (17 * 2**20) + '"}')
    assert _error(str(path)) == f"cluster file '{path}' is 17 MiB, over the 16 MiB such a file may be; fix the file"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"network_bandwidth_gbps": None}, "missing field 'network_bandwidth_gbps'"),
        ({"gpu": None}, "missing field 'gpu'"),
        ({"gpus_per_node": 0}, "field 'gpus_per_node': Input should be greater than 0 (got 0)"),
        ({"nvlink": 1}, "unknown field 'nvlink'"),
        ({"gpu": "h1000"}, "unknown GPU 'h1000' (did you mean"),
        ({"efficiency": {"intra_node": 1.5, "network": 0.9}}, "field 'efficiency.intra_node': Input should be less"),
        ({"efficiency": {"network": 0.9}}, "missing field 'efficiency.intra_node'"),
        ({"efficiency": [0.7]}, "field 'efficiency' must be a JSON object, got an array"),
        ({"sources": {"gpus_per_node": 8}}, "field 'sources.gpus_per_node' must be a citation string"),
        ({"gpu": {"peak_bf16_tflops": 1, "hbm_gib": 1, "hbm_bandwidth_gbps": 1}}, "missing field 'gpu.name'"),
        ({"gpu": {"name": "x", "peak_bf16_tflops": -1, "hbm_gib": 1, "hbm_bandwidth_gbps": 1}},
         "field 'gpu.peak_bf16_tflops': Input should be greater than 0 (got -1)"),
    ],
)
def test_bad_fields_are_named_with_the_file(tmp_path: Path, changes: dict[str, Any], expected: str) -> None:
    entry = {k: v for k, v in {**_by_name_entry(), **changes}.items() if v is not None}
    path = _write(tmp_path, entry)
    message = _error(str(path))
    assert expected in message
    assert message.startswith(f"cluster file '{path}'")


def test_an_inline_gpu_needs_every_efficiency_field(tmp_path: Path) -> None:
    gpu = {"name": "mygpu", "peak_bf16_tflops": 100, "hbm_gib": 40, "hbm_bandwidth_gbps": 1000}
    message = _error(str(_write(tmp_path, _by_name_entry(gpu=gpu))))
    for field in ("gemm_max", "gemm_half_gflop", "attention", "memory"):
        assert f"missing field 'efficiency.{field}'" in message


def test_a_non_path_argument_is_rejected() -> None:
    assert "a cluster is a preset name or a JSON file path, got int" in _error(8)


def test_importing_profiles_pulls_in_no_planner_torch_or_pulp() -> None:
    code = (
        "import sys, profiles; profiles.list_clusters(); "
        "print(sorted(m for m in ('torch', 'pulp', 'planner', 'networkx') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
