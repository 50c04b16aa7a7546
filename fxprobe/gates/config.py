"""Gate thresholds: defaults from the buyer's gate table, overridable with ``gates.toml``.

The schema (:class:`GatesFile`) is the one place that says what a gates file may hold: every key is known
(a typo is an error, not a silent default), every value is a finite number of the right kind (a count is a
whole number >= 1, a percentage is 0-100, a maximum of errors is >= 0) and the band of G3's throughput gain
has min <= max. A bad file is one line naming the file and the field (exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from pydantic import Field

from fxprobe.core.errors import BadInput
from fxprobe.core.schema import (InputModel, NonNegativeInt, Percent, PositiveFloat, PositiveInt, not_below,
                                 validate)
from fxprobe.core.tomlfile import parse_toml, read_text

DEFAULT_FILE = "gates.toml"
LAB_FILE = Path(__file__).resolve().parent.parent.parent / "gates-lab.toml"   # shipped lab-scaled thresholds


class G1Thresholds(InputModel):
    drives_expected: PositiveInt = 24
    arrays: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9@._:\[\]-]{1,100}$")]] = []   # every array that must be self-tested


class G2Thresholds(InputModel):
    baseline_tolerance_pct: Percent = 10.0
    line_efficiency_min_pct: Percent = 83.0
    line_rate_gbps: PositiveFloat = 100.0


class G3Thresholds(InputModel):
    ttft_reduction_min_pct: Percent = 25.0
    throughput_gain_min_pct: Percent = 29.0
    throughput_gain_max_pct: Percent = 40.0
    nodes_sharing: PositiveInt = 8
    nic_ceiling_min_pct: Percent = 90.0

    _band = not_below("throughput_gain_min_pct", "throughput_gain_max_pct")


Fingerprint = Annotated[str, Field(pattern=r"^[0-9a-f]{16}$",
                                   description="an Ed25519 key fingerprint, 16 hex digits (fxprobe report keygen)")]


class G4Thresholds(InputModel):
    soak_hours_min: PositiveFloat = 72.0
    interruptions_max: NonNegativeInt = 0
    fault_visible_errors_max: NonNegativeInt = 0
    data_mismatches_max: NonNegativeInt = 0     # blocks read back wrong (fio verify) over the soak and fault runs
    trusted_signers: list[Fingerprint] = []     # not a threshold: the keys whose signature G4 accepts


class GatesFile(InputModel):
    """gates.toml: one table per gate; a key left out keeps the buyer's default."""

    g1: G1Thresholds = G1Thresholds()
    g2: G2Thresholds = G2Thresholds()
    g3: G3Thresholds = G3Thresholds()
    g4: G4Thresholds = G4Thresholds()


DEFAULTS: dict[str, dict[str, float]] = GatesFile().model_dump()


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

    @property
    def label(self) -> str:
        """Which thresholds these are, in gate names: "" for the buyer's (gates.toml or the defaults),
        else the file's stem ("gates-lab"), so a lab-scaled table never passes for the buyer's."""
        stem = Path(self.source).stem if self.source != "built-in defaults" else ""
        return "" if stem in ("", "gates") else stem

    def arrays(self) -> tuple[str, ...]:
        return tuple(self.values.get("g1", {}).get("arrays") or ())

    def with_arrays(self, arrays: list[str]) -> "GateConfig":
        """The same thresholds with G1's array list replaced (``gate g1 --arrays``)."""
        values = {gate: dict(keys) for gate, keys in self.values.items()}
        values["g1"]["arrays"] = list(arrays)
        return GateConfig(values, self.source)

    def trusted_signers(self) -> tuple[str, ...]:
        return tuple(self.values.get("g4", {}).get("trusted_signers") or ())


def parse_config(text: str, source: str) -> GateConfig:
    return GateConfig(validate(GatesFile, parse_toml(text, source), source).model_dump(), source)


def load_config(path: Path | None = None) -> GateConfig:
    """Thresholds from ``path``; without a path, ``./gates.toml`` if present, else the defaults."""
    if path is None:
        candidate = Path(DEFAULT_FILE)
        if not candidate.is_file():
            return GateConfig()
        path = candidate
    return parse_config(read_text(path, "gate config"), str(path))
