"""Drawing plans for the differential harness: models, random constraints, and the plans meshplan writes.

Every draw comes from ``random.Random(seed)`` alone, so one seed gives the same plans in the same
order. A draw is a model (a dense GQA Llama, a GPT-2 with learned positions and a tied head, a
Mixtral-style MoE and a traced custom module, each a small ``config.json`` or factory of vocabulary
:data:`VOCAB`, and a ResNet-style CNN without a sequence dimension, ``cnn_model.py``), a world of 1-8 ranks and either ``meshplan plan`` with random constraints or
``meshplan estimate ... -o`` of a random configuration (degrees, sp, ZeRO, schedule, vpp, micro-batch,
recompute, uneven stage split, cp). Each becomes a :class:`Draw`: a plan to run, or the validator's
refusal (which must name a native rule), with the exact command that replays it.
"""

from __future__ import annotations

import json
import random
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plan_helpers import BATCH, LLAMA_CONFIG, SEQ

HERE = Path(__file__).parent
VOCAB = 128
CLUSTER = "dgx-a100"
WORLDS = (1, 2, 2, 4, 4, 4, 8)
"""Rank counts drawn (weighted towards 2 and 4: an 8-process world is slow on a 2-core machine)."""

MODEL_CONFIGS: dict[str, dict[str, Any]] = {
    "llama": {**LLAMA_CONFIG, "num_key_value_heads": 2},
    "gpt2": {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 32, "n_head": 4, "n_layer": 4,
             "vocab_size": VOCAB, "n_positions": 64, "n_ctx": 64, "tie_word_embeddings": True, "bos_token_id": 0,
             "eos_token_id": 0, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0},
    "mixtral": {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 32, "intermediate_size": 64,
                "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 4, "vocab_size": VOCAB,
                "num_local_experts": 4, "num_experts_per_tok": 2, "max_position_embeddings": 64, "tie_word_embeddings": False},
}
"""Small configs: hidden 32, 4 heads, vocabulary :data:`VOCAB`, no dropout (steps must be deterministic)."""


def write_models(folder: Path) -> dict[str, str]:
    """Model arguments by name: the configs written into ``folder``, and the traced custom module."""
    out = {}
    for name, config in MODEL_CONFIGS.items():
        path = folder / f"{name}.json"
        path.write_text(json.dumps(config))
        out[name] = str(path)
    out["custom"] = f"{HERE / 'custom_model.py'}:build"
    out["cnn"] = f"{HERE / 'cnn_model.py'}:build"
    return out


@dataclass(frozen=True)
class Draw:
    """One drawn plan: to run (``plan_json``), or refused by the validator (``refusal``)."""

    name: str
    model: str
    world: int
    origin: str
    """``plan`` (search with constraints) or ``estimate`` (estimate -o of one configuration)."""
    command: str
    """The meshplan command that writes this plan (``-o plan.json``)."""
    plan_json: str | None = None
    refusal: str | None = None


def _choice(rng: random.Random, options: list[Any]) -> Any:
    return options[rng.randrange(len(options))]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def plan_constraints(rng: random.Random, world: int) -> dict[str, Any]:
    """Random constraints of ``meshplan plan``: each dimension fixed with probability 0.35."""
    pool = {
        "tp": lambda: _choice(rng, [d for d in _divisors(world) if d <= 4]),
        "pp": lambda: _choice(rng, [d for d in _divisors(world) if d <= 4]),
        "zero": lambda: rng.randrange(4),
        "schedule": lambda: _choice(rng, ["1f1b", "gpipe", "zb-h1", "interleaved-1f1b"]),
        "micro_batch": lambda: _choice(rng, [1, 2, 4, 8]),
        "recompute": lambda: _choice(rng, ["none", "selective", "full"]),
        "sp": lambda: _choice(rng, [True, False]),
        "ep": lambda: _choice(rng, [1, 2]),
        "cp": lambda: _choice(rng, [d for d in (1, 2, 4) if world % d == 0]),
    }
    return {k: make() for k, make in pool.items() if rng.random() < 0.35}


LAYERS = {"cnn": 6}
"""Plan layers of the models that do not have 7 (embedding, 4 blocks, norm, head): the CNN's stem,
4 residual blocks and head."""


def estimate_settings(rng: random.Random, world: int, layers: int = 7, moe: bool = False) -> dict[str, Any]:
    """A random configuration of ``meshplan estimate``: degrees tiling ``world`` (cp 2 or 4 in about a
    quarter of the even worlds; tp > 1 wherever the world allows for a mixture-of-experts model, so that
    MoE under sequence parallelism is drawn in proportion), and the rest."""
    cp = _choice(rng, [d for d in (2, 4) if world % d == 0]) if world % 2 == 0 and rng.random() < 0.25 else 1
    tps = [d for d in _divisors(world // cp) if d <= 4]
    tp = _choice(rng, [d for d in tps if d > 1] if moe and len(tps) > 1 else tps)
    pp = _choice(rng, [d for d in _divisors(world // (tp * cp)) if d <= 4])
    dp = world // (tp * pp * cp)
    micro = _choice(rng, [d for d in _divisors(BATCH // dp)])
    cfg: dict[str, Any] = dict(tp=tp, pp=pp, zero=rng.randrange(4), micro_batch=micro,
                               recompute=_choice(rng, ["none", "selective", "full"]), sp=tp > 1 and rng.random() < 0.7)
    if pp > 1:
        cfg["schedule"] = _choice(rng, ["1f1b", "gpipe", "zb-h1", "interleaved-1f1b"])
        if cfg["schedule"] == "interleaved-1f1b":
            cfg["vpp"] = 2 if 4 % (pp * 2) == 0 else 1
        elif rng.random() < 0.4:  # an uneven split of the model's layers
            cuts = sorted(rng.sample(range(1, layers), pp - 1))
            cfg["stage_layers"] = [b - a for a, b in zip([0, *cuts], [*cuts, layers])]
    if cp > 1:
        cfg["cp"] = cp
    return cfg


def _flags(settings: dict[str, Any]) -> str:
    parts = []
    for key, value in settings.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            parts.append(flag if value else f"--no-{key}")
        elif isinstance(value, list):
            parts.append(f"{flag} {','.join(map(str, value))}")
        else:
            parts.append(f"{flag} {value}")
    return " ".join(parts)


def draw(rng: random.Random, models: dict[str, str], index: int) -> Draw | None:
    """One random draw (see :func:`make_draw`)."""
    name = _choice(rng, sorted(models))
    world, origin = _choice(rng, list(WORLDS)), _choice(rng, ["plan", "estimate"])
    settings = plan_constraints(rng, world) if origin == "plan" else estimate_settings(rng, world, LAYERS.get(name, 7), name == "mixtral")
    return make_draw(f"d{index:04d}-{name}-{origin}-w{world}", models[name], world, origin, settings)


def make_draw(tag: str, model: str, world: int, origin: str, settings: dict[str, Any]) -> Draw | None:
    """The plan meshplan writes for ``settings``: None when it finds no plan (exit 3) or rejects the
    request as bad input (exit 2) without naming a native rule (contradictory constraints, degrees
    the model cannot take); a refusal when it names one."""
    import planner
    from planner.errors import InputError, NoFeasiblePlanError

    base = dict(model=model, cluster=CLUSTER, gpus=world, global_batch=BATCH, seq_len=SEQ)
    verb = "plan" if origin == "plan" else "estimate"
    command = (f"meshplan {verb} --model {shlex.quote(model)} --cluster {CLUSTER} --gpus {world} "
               f"--global-batch {BATCH} --seq-len {SEQ} {_flags(settings)} -o plan.json")
    try:
        plan = planner.plan(**base, **settings) if origin == "plan" else planner.config_plan(**base, **settings)
    except NoFeasiblePlanError:
        return None
    except InputError as err:
        if "native rule" in str(err):
            return Draw(tag, model, world, origin, command, refusal=str(err))
        return None
    return Draw(tag, model, world, origin, command, plan_json=plan.to_json())


REPRODUCTIONS: tuple[tuple[str, str, int, str, dict[str, Any]], ...] = (
    ("repro-llama-tp2-pp2", "llama", 4, "plan", {"tp": 2, "pp": 2}),
    ("repro-llama-1f1b-one-micro", "llama", 4, "plan", {"tp": 2, "pp": 2, "schedule": "1f1b"}),
    ("repro-llama-zb-one-micro", "llama", 2, "estimate", {"tp": 1, "pp": 2, "schedule": "zb-h1", "micro_batch": 8}),
    ("repro-gpt2-dp", "gpt2", 2, "plan", {}),
    ("repro-gpt2-one-rank", "gpt2", 1, "plan", {}),
    ("repro-gpt2-tp2-pp2", "gpt2", 4, "estimate", {"tp": 2, "pp": 2, "schedule": "1f1b", "micro_batch": 2}),
    ("repro-mixtral-ep2", "mixtral", 4, "plan", {"ep": 2}),
    ("repro-mixtral", "mixtral", 2, "plan", {}),
    ("repro-cnn-dp-zero3", "cnn", 4, "estimate", {"tp": 1, "pp": 1, "zero": 3, "micro_batch": 1, "recompute": "full"}),
    ("repro-cnn-tp2-pp2", "cnn", 4, "estimate", {"tp": 2, "pp": 2, "schedule": "1f1b", "micro_batch": 2}),
    ("repro-cnn-plan", "cnn", 4, "plan", {}),
    ("repro-llama-cp2-tp2-sp", "llama", 4, "estimate", {"tp": 2, "pp": 1, "cp": 2, "sp": True, "micro_batch": 4, "recompute": "full"}),
    ("repro-mixtral-tp2-sp", "mixtral", 2, "estimate", {"tp": 2, "pp": 1, "sp": True, "micro_batch": 8}),
    ("repro-llama-zb-tp2", "llama", 4, "estimate", {"tp": 2, "pp": 2, "sp": True, "schedule": "zb-h1", "micro_batch": 4}),
)
"""The issue's reproductions at this harness's size: (tag, model, world, origin, settings)."""


def reproductions(models: dict[str, str]) -> list[Draw]:
    """The draws of :data:`REPRODUCTIONS` (each writes a plan or is refused by a native rule)."""
    out = [make_draw(tag, models[name], world, origin, settings) for tag, name, world, origin, settings in REPRODUCTIONS]
    assert all(d is not None for d in out), "a reproduction found no plan"
    return [d for d in out if d is not None]


def draws(seed: int, count: int, models: dict[str, str], max_tries: int = 20) -> list[Draw]:
    """``count`` draws from ``seed`` (each retried up to ``max_tries`` times until meshplan writes a plan
    or refuses it by a native rule)."""
    rng = random.Random(seed)
    out: list[Draw] = []
    for index in range(count):
        for _ in range(max_tries):
            got = draw(rng, models, index)
            if got is not None:
                out.append(got)
                break
    return out
