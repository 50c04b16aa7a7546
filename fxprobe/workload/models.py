"""Built-in model geometry: what a KV-cache chunk weighs for a model a user names.

Bytes per chunk per tensor-parallel rank = 2 * L * T * H_kv_rank * D * dtype_bytes,
H_kv_rank = max(1, H_kv / TP) (LMCache ``MemoryFormat.KV_2LTD``: K and V, L layers, T tokens per chunk, D the head size).
"""

from __future__ import annotations

from dataclasses import dataclass

from fxprobe.core.data import AsDict
from fxprobe.core.errors import BadInput

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "float16": 2, "bfloat16": 2, "fp8": 1, "fp32": 4}


@dataclass(frozen=True)
class ModelGeometry(AsDict):
    name: str
    layers: int
    kv_heads: int
    head_dim: int
    weights_bytes: int | None = None  # bf16 full-model snapshot size, when known


MODELS: dict[str, ModelGeometry] = {m.name.lower(): m for m in (
    ModelGeometry("Qwen2.5-7B-Instruct", 28, 4, 128, 15_230_000_000),
    ModelGeometry("Qwen2.5-32B-Instruct", 64, 8, 128, 65_600_000_000),
    ModelGeometry("Qwen3-Coder-480B-A35B", 62, 8, 128, 480_000_000_000),
    ModelGeometry("Qwen3-Coder-480B-A35B-FP8", 62, 8, 128, 482_000_000_000),
    ModelGeometry("Llama-3.1-8B", 32, 8, 128, 16_060_000_000),
    ModelGeometry("Llama-3.1-70B", 80, 8, 128, 141_100_000_000),
)}

ALIASES = {
    "qwen2.5-7b": "qwen2.5-7b-instruct",
    "qwen2.5-32b": "qwen2.5-32b-instruct",
    "qwen3-coder-480b": "qwen3-coder-480b-a35b",
    "qwen3-coder-480b-fp8": "qwen3-coder-480b-a35b-fp8",
}


def known_names() -> list[str]:
    return sorted(m.name for m in MODELS.values())


def lookup(name: str, *, source: str = "model") -> ModelGeometry:
    """The geometry of a built-in model; BadInput listing the known names otherwise."""
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key not in MODELS:
        raise BadInput(f"{source}: unknown model {name!r}; known: {', '.join(known_names())}",
                       hint="or give layers, kv_heads, head_dim instead of a name")
    return MODELS[key]


def dtype_bytes(dtype: str, *, source: str = "kv_dtype") -> int:
    key = str(dtype).strip().lower()
    if key not in DTYPE_BYTES:
        raise BadInput(f"{source}: unknown KV dtype {dtype!r}; allowed: {', '.join(sorted(DTYPE_BYTES))}")
    return DTYPE_BYTES[key]


def kv_heads_per_rank(kv_heads: int, tp: int) -> int:
    """KV heads each TP rank holds; replicated (1) when TP exceeds the KV head count."""
    return max(1, kv_heads // tp)


def check_tp(kv_heads: int, tp: int, *, source: str = "tp") -> None:
    """vLLM needs KV heads divisible by TP or TP divisible by KV heads."""
    if tp < 1 or kv_heads < 1:
        raise BadInput(f"{source}: tp and kv_heads must be >= 1 (got tp={tp}, kv_heads={kv_heads})")
    if kv_heads % tp and tp % kv_heads:
        raise BadInput(f"{source}: tp={tp} does not divide kv_heads={kv_heads} (nor the reverse)",
                       hint="use a TP size that divides the KV head count")


def chunk_bytes(layers: int, chunk_tokens: int, kv_heads: int, head_dim: int, dtype_size: int,
                tp: int = 1) -> int:
    """Bytes of one stored KV chunk for one TP rank: 2*L*T*H_kv_rank*D*dtype."""
    return 2 * layers * chunk_tokens * kv_heads_per_rank(kv_heads, tp) * head_dim * dtype_size
