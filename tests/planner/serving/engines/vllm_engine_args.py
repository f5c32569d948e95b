"""Run vLLM's own ``vllm serve`` argument parser and argument checks on exported argvs, on CPU.

Run as a script in a child process (``python vllm_engine_args.py ROOT OUT GPUS_PER_NODE`` with a JSON list of
argvs, the words after ``vllm serve``, on stdin; it writes one result per argv to OUT), so that the
stand-ins below never reach the test process. ``ROOT`` holds the ``vllm/`` Python files of the
registry's vllm 0.10.1 wheel, the release the export writes for, extracted unchanged (``wheel.py``;
vLLM cannot be installed beside the pinned CPU torch: each release requires its own torch build).

Every vLLM module runs unchanged, against the installed torch, pydantic and transformers:
``vllm.entrypoints.openai.cli_args.make_arg_parser`` builds the ``vllm serve`` parser
(``FrontendArgs`` and ``AsyncEngineArgs.add_cli_args``, whose flags, types and choices vLLM derives
from its config dataclasses, and the positional model) on the parser ``vllm/entrypoints/cli/serve.py``
would hand it (that module itself imports the whole API server: FastAPI, uvloop, Prometheus), then
``validate_parsed_serve_args``, ``AsyncEngineArgs.from_cli_args`` (``EngineArgs.__post_init__``),
and vLLM's ``ParallelConfig`` and ``CacheConfig`` built from the parsed values (their validators:
sizes, block size, memory fraction, KV cache dtype). Not run: ``create_engine_config``, which
downloads the model's Hugging Face config.

Stand-ins, for what the argument code imports but never calls:

- the compiled extension ``vllm._C`` and third-party packages of vLLM's runtime that are not
  installed here (:data:`ABSENT`: ZeroMQ, msgspec, the OpenAI client types, tokenizers of other
  formats ...): modules whose every attribute is a class that accepts any arguments and any
  subscripts, and that pydantic accepts as any value;
- the platform: vLLM detects its platform through NVML, absent on a CPU machine (it would pick
  ``UnspecifiedPlatform``, device type ""): ``vllm.platforms`` is given vLLM's own ``CudaPlatform``
  (the non-NVML variant vLLM itself picks when NVML does not load), and the GPUs it counts on the
  node (``cuda_device_count_stateless``, which picks the multiprocessing backend when an instance
  fits on the node) are the plan's GPUs per node, the third argument.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import sys
import types
from typing import Any

ABSENT = ("vllm._C", "cachetools", "msgspec", "zmq", "blake3", "gguf", "prometheus_client", "openai", "fastapi", "uvicorn",
          "cbor2", "pybase64", "partial_json_parser", "lark", "xgrammar", "outlines", "compressed_tensors", "mistral_common",
          "diskcache", "setproctitle", "sentencepiece", "openai_harmony")
"""Modules vLLM 0.10.1's import of its argument code reaches that are not installed here."""


class _Anything(type):
    """The metaclass of the stand-in classes: any attribute, subscript or union is a stand-in too."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _stand_in(name)

    def __getitem__(cls, _item: Any) -> Any:
        return cls

    def __or__(cls, _other: Any) -> Any:
        return cls

    __ror__ = __or__


def _any_schema(_cls: Any, _source: Any, _handler: Any) -> Any:
    from pydantic_core import core_schema

    return core_schema.any_schema()


def _stand_in(name: str) -> Any:
    body = {"__init__": lambda self, *a, **k: None, "__call__": lambda self, *a, **k: None,
            "__init_subclass__": classmethod(lambda cls, **k: None), "__get_pydantic_core_schema__": classmethod(_any_schema)}
    return _Anything(name, (), body)


class _AbsentModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _stand_in(name)


class _Absent(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds :data:`ABSENT` modules (and their submodules) as stand-ins."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname in ABSENT or fullname.split(".")[0] in ABSENT:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        module = _AbsentModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def _parser(gpus_per_node: int) -> Any:
    """``vllm serve``'s parser: vLLM's ``make_arg_parser`` (which adds the positional model) on the
    parser ``vllm/entrypoints/cli/serve.py`` would hand it (that module imports the whole API server)."""
    import vllm.platforms
    from vllm.platforms.cuda import CudaPlatform

    vllm.platforms._current_platform = CudaPlatform()
    import vllm.config.parallel

    vllm.config.parallel.cuda_device_count_stateless = lambda: gpus_per_node
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    from vllm.utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))


def check(parser: Any, argv: list[str]) -> dict[str, Any]:
    """vLLM's reading of ``vllm serve ARGV``: the values the plan sets, or the error vLLM raised."""
    from vllm.config import CacheConfig, ParallelConfig
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.openai.cli_args import validate_parsed_serve_args

    try:
        args = parser.parse_args(argv)
        validate_parsed_serve_args(args)
        args.model = args.model_tag
        engine = AsyncEngineArgs.from_cli_args(args)
        ParallelConfig(tensor_parallel_size=engine.tensor_parallel_size, pipeline_parallel_size=engine.pipeline_parallel_size,
                       enable_expert_parallel=engine.enable_expert_parallel)
        CacheConfig(block_size=engine.block_size, gpu_memory_utilization=engine.gpu_memory_utilization,
                    cache_dtype=engine.kv_cache_dtype)
    except SystemExit as err:
        return {"error": f"argparse exit {err.code}"}
    except Exception as err:  # vLLM's checks raise ValueError, pydantic's ValidationError, ...
        return {"error": f"{type(err).__name__}: {err}"}
    kv = engine.kv_transfer_config
    return {"tp": engine.tensor_parallel_size, "pp": engine.pipeline_parallel_size, "max_num_seqs": engine.max_num_seqs,
            "max_model_len": engine.max_model_len, "expert_parallel": engine.enable_expert_parallel,
            "quantization": engine.quantization, "kv_cache_dtype": engine.kv_cache_dtype, "port": args.port,
            "kv_connector": kv.kv_connector if kv is not None else None,
            "fi_allreduce_fusion": bool(getattr(getattr(engine.compilation_config, "pass_config", None),
                                                "enable_fi_allreduce_fusion", False))}


def main() -> int:
    root, out = sys.argv[1], sys.argv[2]
    sys.meta_path.insert(0, _Absent())
    sys.path.insert(0, root)
    parser = _parser(int(sys.argv[3]))
    results = [check(parser, argv) for argv in json.load(sys.stdin)]
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(results, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
