"""Gate thresholds: defaults from the buyer's gate table, overridable with ``gates.toml``.

Every key that a TOML file sets must be known here (a typo is an error, not a silent
default) and must be a number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fxprobe.core.errors import BadInput
from fxprobe.core.tomlfile import parse_toml, read_text

DEFAULT_FILE = "gates.toml"

DEFAULTS: dict[str, dict[str, float]] = {
    "g1": {"drives_expected": 24},
    "g2": {"baseline_tolerance_pct": 10.0, "line_efficiency_min_pct": 83.0, "line_rate_gbps": 100.0},
    "g3": {"ttft_reduction_min_pct": 25.0, "throughput_gain_min_pct": 29.0,
           "throughput_gain_max_pct": 40.0, "nodes_sharing": 8, "nic_ceiling_min_pct": 90.0},
    "g4": {"soak_hours_min": 72.0, "interruptions_max": 0, "fault_visible_errors_max": 0, "trusted_signers": []},
}
LISTS = {"trusted_signers"}     # not thresholds: the Ed25519 key fingerprints whose signature G4 accepts


def _fingerprints(value, where: str) -> list[str]:
    """16 lower-case hex digits each (`fxprobe report keygen` prints them)."""
    if not isinstance(value, list) or not all(isinstance(v, str) and len(v) == 16 and
                                              all(c in "0123456789abcdef" for c in v) for v in value):
        raise BadInput(f"{where} must be a list of key fingerprints (16 hex digits, as `fxprobe report keygen` "
                       f"prints), got {value!r}")
    return list(value)


@dataclass(frozen=True)
class GateConfig:
    values: dict[str, dict[str, float]] = field(default_factory=lambda: {k: dict(v) for k, v in DEFAULTS.items()})
    source: str = "built-in defaults"

    def get(self, gate: str, key: str) -> float:
        try:
            return self.values[gate][key]
        except KeyError:
            raise BadInput(f"gate config: no threshold {gate}.{key}") from None

    def to_dict(self) -> dict:
        return {"source": self.source, "thresholds": self.values}

    def trusted_signers(self) -> tuple[str, ...]:
        return tuple(self.values.get("g4", {}).get("trusted_signers") or ())


def parse_config(text: str, source: str) -> GateConfig:
    data = parse_toml(text, source)
    values = {gate: dict(keys) for gate, keys in DEFAULTS.items()}
    for gate, table in data.items():
        if gate not in DEFAULTS:
            raise BadInput(f"{source}: unknown section [{gate}]", hint=f"known: {', '.join(DEFAULTS)}")
        if not isinstance(table, dict):
            raise BadInput(f"{source}: {gate} must be a table [{gate}]")
        for key, value in table.items():
            if key not in DEFAULTS[gate]:
                raise BadInput(f"{source}: unknown threshold {gate}.{key}",
                               hint=f"known: {', '.join(DEFAULTS[gate])}")
            if key in LISTS:
                values[gate][key] = _fingerprints(value, f"{source}: {gate}.{key}")
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise BadInput(f"{source}: {gate}.{key} must be a number, got {value!r}")
            values[gate][key] = value
    low, high = values["g3"]["throughput_gain_min_pct"], values["g3"]["throughput_gain_max_pct"]
    if low > high:
        raise BadInput(f"{source}: g3.throughput_gain_min_pct ({low}) is above g3.throughput_gain_max_pct ({high})")
    return GateConfig(values, source)


def load_config(path: Path | None = None) -> GateConfig:
    """Thresholds from ``path``; without a path, ``./gates.toml`` if present, else the defaults."""
    if path is None:
        candidate = Path(DEFAULT_FILE)
        if not candidate.is_file():
            return GateConfig()
        path = candidate
    return parse_config(read_text(path, "gate config"), str(path))
