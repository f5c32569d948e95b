"""Mixed clusters (``C:N,C:N`` and groups JSON files) and the ``--slow`` / ``--down`` parsers."""

from __future__ import annotations

import json

import pytest

from profiles import (
    ProfileError,
    degrade,
    is_group_spec,
    is_groups_file,
    load_cluster,
    load_hetero_cluster,
    parse_down,
    parse_slow,
)


def test_groups_in_order_with_default_link():
    cluster = load_hetero_cluster("dgx-h100:16,dgx-a100:32", 48)
    assert [(g.cluster.name, g.gpus) for g in cluster.groups] == [("dgx-h100", 16), ("dgx-a100", 32)]
    link = cluster.link(0, 1)
    assert link.bandwidth_gbps == min(g.cluster.network_bandwidth_gbps for g in cluster.groups)
    assert cluster.first_gpu(1) == 16 and cluster.first_node(1) == 2 and not cluster.is_homogeneous


def test_single_preset_is_one_group_unchanged():
    cluster = load_hetero_cluster("dgx-a100", 64)
    assert cluster.is_homogeneous and cluster.groups[0].cluster == load_cluster("dgx-a100")
    assert not is_group_spec("dgx-a100") and is_group_spec("dgx-a100:8")


def test_groups_file_with_links(tmp_path):
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps({"groups": [{"cluster": "dgx-h100", "gpus": 8}, {"cluster": "dgx-a100", "gpus": 16}],
                                "links": {"bandwidth_gbps": 5, "latency_us": 20}}))
    cluster = load_hetero_cluster(path)
    assert cluster.name == "mixed" and cluster.gpus == 24
    assert cluster.link(1, 0).bandwidth_gbps == 5 and cluster.link(0, 1).latency_us == 20


@pytest.mark.parametrize("text, words", [
    ('{"groups": [{"cluster": "dgx-a100", "gpus": 8}], "about": "' + "x" * (17 * 2**20) + '"}',
     "is 17 MiB, over the 16 MiB such a file may be; fix the file"),
    ('{"groups": ' + "[" * 100_000 + "]" * 100_000 + "}", "nests 100001 levels deep (at most 64); fix the file"),
    ('{"groups": [{"cluster": "dgx-a100", "gpus": NaN}]}', "holds NaN, which is not JSON"),
])
def test_groups_files_pass_the_gate_of_single_cluster_files(tmp_path, text, words):
    """The size cap, depth check and NaN refusal of profiles.jsonio, as a single-cluster file gets them."""
    path = tmp_path / "groups.json"
    path.write_text(text)
    for load in (lambda: load_hetero_cluster(path), lambda: is_groups_file(path), lambda: load_cluster(path)):
        with pytest.raises(ProfileError) as err:
            load()
        assert str(err.value) == f"cluster file '{path}' {words}" or words in str(err.value)
        assert "\n" not in str(err.value)


def test_is_groups_file_leaves_other_paths_to_the_cluster_loader(tmp_path):
    single = tmp_path / "one.json"
    single.write_text(json.dumps({"gpu": "a100", "gpus_per_node": 8}))
    assert not is_groups_file(single) and not is_groups_file(tmp_path / "missing.json") and not is_groups_file("dgx-a100")
    groups = tmp_path / "g.json"
    groups.write_text(json.dumps({"groups": [{"cluster": "dgx-a100", "gpus": 8}]}))
    assert is_groups_file(groups)


@pytest.mark.parametrize("arg, gpus, words", [
    ("dgx-h999:16", None, "unknown cluster preset"),
    ("dgx-h100:12", None, "whole number"),
    ("dgx-h100:x", None, "whole number"),
    ("dgx-h100:16,dgx-a100:32", 40, r"16 \+ 32 = 48 GPUs, not 40"),
    ("dgx-h100", None, "give its GPU count"),
])
def test_bad_groups_one_line(arg, gpus, words):
    with pytest.raises(ProfileError, match=words) as err:
        load_hetero_cluster(arg, gpus)
    assert "\n" not in str(err.value)


def test_slow_and_down_apply_cluster_wide_indices():
    cluster = degrade(load_hetero_cluster("dgx-h100:16,dgx-a100:32"), "5=0.5,node:2=0.7", "node:3")
    h100, a100 = cluster.groups
    assert h100.speed(5) == 0.5 and h100.speed(4) == 1.0
    assert all(a100.speed(i) == 0.7 for i in range(8)) and a100.speed(8) == 1.0
    assert a100.down_nodes == (1,) and a100.alive_nodes() == [0, 2, 3]
    assert parse_slow(["5=0.5", "node:1=0.9"])[1].node and parse_down("node:3,node:3") == (3,)


@pytest.mark.parametrize("slow, down, words", [
    ("48=0.5", None, "past the cluster's 48 GPUs"),
    ("5=0", None, r"\(0, 1\]"),
    ("5=1.5", None, r"\(0, 1\]"),
    ("5=fast", None, "must be a number"),
    ("node:6=0.5", None, "nodes 0..5"),
    (None, "node:0,node:1,node:2,node:3,node:4,node:5", "every one"),
    (None, "3", "node:N"),
    ("5", None, "GPU=SPEED"),
])
def test_bad_degradation_one_line(slow, down, words):
    cluster = load_hetero_cluster("dgx-h100:16,dgx-a100:32")
    with pytest.raises(ValueError, match=words) as err:
        degrade(cluster, slow, down)
    assert isinstance(err.value, ProfileError) and "\n" not in str(err.value)


def test_one_cluster_takes_every_count_the_plain_planner_takes():
    """Issue 35: whole nodes as one group, a partial last node as a second group of the same preset."""
    from profiles import one_cluster

    a100 = load_cluster("dgx-a100")
    assert one_cluster(a100, 16).groups == (load_hetero_cluster("dgx-a100:16").groups[0],)
    twelve = one_cluster(a100, 12)
    assert [(g.gpus, g.cluster.gpus_per_node) for g in twelve.groups] == [(8, 8), (4, 4)]
    assert twelve.first_gpu(1) == 8 and twelve.first_node(1) == 1 and twelve.gpus == 12
    assert twelve.link(0, 1).bandwidth_gbps == a100.network_bandwidth_gbps
    assert twelve.groups[1].cluster == a100.model_copy(update={"gpus_per_node": 4})
    assert [(g.gpus, g.cluster.gpus_per_node) for g in one_cluster(a100, 3).groups] == [(3, 3)]
    down = degrade(twelve, "0=0.5", "node:1")
    assert down.groups[0].speed(0) == 0.5 and down.groups[1].down_nodes == (0,)
    assert load_hetero_cluster("dgx-a100", 12) == twelve
    for bad in (0, -8, True):
        with pytest.raises(ProfileError, match="positive whole number"):
            one_cluster(a100, bad)
