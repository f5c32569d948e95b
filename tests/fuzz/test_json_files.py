"""Files that are not what they claim: random JSON shapes, deep nesting, NaN, non-UTF-8 bytes,
junk, as a plan, a cluster file and a config.json; every one is exit 2 with one line."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzkit import FUZZ, assert_refused

JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8)),
                    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)), max_leaves=20)
RAW = st.one_of(
    st.binary(max_size=200),
    st.integers(65, 5000).map(lambda n: b"[" * n),
    st.integers(65, 5000).map(lambda n: b'{"a":' * n),
    st.sampled_from([b'{"schema_version": "1.0", "x": NaN}', b"Infinity", b"\xff\xfe{}", b'{"schema_version": "1.0"', b""]),
)


def _write(tmp_path_factory, data: bytes, name: str) -> str:
    path = tmp_path_factory.mktemp("j") / name
    path.write_bytes(data)
    return str(path)


@settings(FUZZ, max_examples=40)
@given(value=JSON)
def test_random_json_as_a_plan(tmp_path_factory, value) -> None:
    path = _write(tmp_path_factory, json.dumps(value).encode(), "plan.json")
    assert_refused("validate", path)
    assert_refused("estimate", "--plan", path)


@settings(FUZZ, max_examples=40)
@given(data=RAW, as_=st.sampled_from(["plan", "cluster", "config"]))
def test_raw_bytes_as_any_json_input(tmp_path_factory, data, as_) -> None:
    path = _write(tmp_path_factory, data, "config.json" if as_ == "config" else "x.json")
    if as_ == "plan":
        assert_refused("export", path, "--to", "megatron")
    elif as_ == "cluster":
        assert_refused("estimate", "--model", "llama3.1-8b", "--cluster", path, "--gpus", "8", "--global-batch", "8", "--seq-len", "128")
    else:
        assert_refused("estimate", "--model", path, "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "8", "--seq-len", "128")


def test_a_hostile_plan_of_nested_brackets_is_refused_by_every_command(tmp_path_factory) -> None:
    from fuzzkit import refused_everywhere

    refused_everywhere(_write(tmp_path_factory, b"[" * 10**5 + b"]" * 10**5, "plan.json"))


def test_fifty_megabytes_of_junk_is_refused_unread(tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("junk") / "plan.json"
    with open(path, "wb") as handle:
        handle.truncate(50 * 2**20)
    line = assert_refused("validate", str(path))
    assert "MiB" in line


@settings(FUZZ, max_examples=20)
@given(key=st.sampled_from(["hidden_size", "num_attention_heads", "intermediate_size", "vocab_size", "num_hidden_layers"]),
       value=st.one_of(st.integers(2**40, 10**300), st.integers(-(10**6), 0), st.sampled_from(["8", 8.5, None, [], True])))
def test_absurd_config_json_values(tmp_path_factory, key, value) -> None:
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
              "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 128256,
              "max_position_embeddings": 8192, key: value}
    path = _write(tmp_path_factory, json.dumps(config).encode(), "config.json")
    assert_refused("estimate", "--model", path, "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "8", "--seq-len", "128", "--json")


@settings(FUZZ, max_examples=10)
@given(field=st.sampled_from(["runtime_overhead_gib", "network_bandwidth_gbps", "intra_node_bandwidth_gbps", "network_latency_us"]))
def test_a_cluster_with_infinite_numbers_is_refused_not_printed_as_infinity(tmp_path_factory, field) -> None:
    entry = {"gpu": "h100-sxm", "gpus_per_node": 8, "intra_node_bandwidth_gbps": 450, "network_bandwidth_gbps": 50,
             "intra_node_latency_us": 2.0, "network_latency_us": 4.0, "runtime_overhead_gib": 1.0,
             "efficiency": {"intra_node": 0.78, "network": 0.9, "overlap_slowdown": 0.15}}
    text = json.dumps({**entry, field: 0.5}).replace(f'"{field}": 0.5', f'"{field}": 1e999')  # JSON for an infinite float
    path = _write(tmp_path_factory, text.encode(), "inf.json")
    assert_refused("estimate", "--model", "llama3.1-8b", "--cluster", path, "--gpus", "8", "--global-batch", "8", "--seq-len", "128", "--json")
