"""Gate thresholds: defaults from the buyer's gate table, overridable with ``gates.toml``.

The schema (:class:`GatesFile`) is the one place that says what a gates file may hold: every key is known
(a typo is an error, not a silent default), every value is a finite number of the right kind (a count is a
whole number >= 1, a percentage is 0-100, a maximum of errors is >= 0) and the band of G3's throughput gain
has min <= max. A bad file is one line naming the file and the field (exit 2).

A file that is not the buyer's says so: ``[scale] lab_scaled = true`` (the shipped gates-lab.toml). Only such a
file may depart from the buyer's thresholds with a reason (``[scale.scaled]``, one reason per threshold, every
departure named) or leave criteria out (``[scale.not_judged]``, one reason per threshold they are judged with):
a buyer's or a vendor's gates.toml that names either is refused, so no criterion is dropped quietly. Every
scaled value and every criterion left out is printed, with its reason, beside the gate it belongs to.

Any other file (a ``./gates.toml`` picked up from the working directory too) whose values depart from the buyer's
defaults is *custom*: each departure (key, the buyer's value, this value) is printed above the gate, beside each
criterion judged with it (``CUSTOM g2.line_efficiency_min_pct = 60 (the buyer's 83)``) and in the gate run's
``thresholds`` (``label`` "custom thresholds", ``custom``), its gates are named "(custom thresholds)", and a
report over them is never ACCEPTED (PASSED WITH CUSTOM THRESHOLDS at best).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Annotated

from pydantic import ConfigDict, Field, ValidationInfo, field_validator

from fxprobe.core.errors import BadInput
from fxprobe.core.schema import (InputModel, NonNegativeFloat, NonNegativeInt, Percent, PositiveFloat, PositiveInt,
                                 beside, not_below, validate)
from fxprobe.core.tomlfile import parse_toml, read_text

DEFAULT_FILE = "gates.toml"
LAB_FILE = Path(__file__).resolve().parent.parent.parent / "gates-lab.toml"   # shipped lab-scaled thresholds


class G1Thresholds(InputModel):
    drives_expected: PositiveInt = 24
    # each self-test's drives re-judged here, whatever limits it ran with (gates.g1)
    media_errors_max: NonNegativeInt = 0                  # the worst drive's media errors
    wear_max_pct: Annotated[int, Field(ge=0, le=255)] = 90    # the worst drive's percentage used (NVMe: 0-255)
    spare_min_pct: Percent = 10.0                         # available spare, at least this and the drive's threshold
    spare_unaccounted_max: NonNegativeInt = 0             # drives reporting 0 % spare with threshold 0 % (emulated)
    firmware_versions_max: PositiveInt = 1                # distinct firmware versions among the drives
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
    nic_ceiling_gbps: PositiveFloat = 100.0     # the ceiling the read-back is judged against: the array port's line rate
    readback_working_set_min_gib: PositiveFloat = 248.0   # the read-back's data: more than an array's cache holds
    concurrency_levels: list[PositiveInt] = [8, 16, 32]    # not a threshold: the levels G3 must compare (R2's)

    _band = not_below("throughput_gain_min_pct", "throughput_gain_max_pct")


Fingerprint = Annotated[str, Field(pattern=r"^[0-9a-f]{16}$",
                                   description="an Ed25519 key fingerprint, 16 hex digits (fxprobe report keygen)")]


class G4Thresholds(InputModel):
    soak_hours_min: PositiveFloat = 72.0
    interruptions_max: NonNegativeInt = 0
    soak_stall_max_s: PositiveFloat = 5.0       # the soak's stall limit (--stall) G4 accepts: a longer one hides stalls
    # "invisible to the workload", judged on each drive-pull and link-cut fault run's own measured figures
    fault_visible_errors_max: NonNegativeInt = 0         # I/O errors the workload saw
    fault_stall_max_s: NonNegativeFloat = 2.0            # longest time with no successful completion
    fault_throughput_min_pct: Percent = 50.0             # throughput in the fault window vs the steady state before it
    fault_p99_ratio_max: PositiveFloat = 10.0            # p99 latency in the fault window / p99 before it
    # what a fault run must have exercised for its figures to count (its scenario's timing and verified region)
    fault_window_min_s: PositiveFloat = 30.0             # timing.fault_s: the fault lasts past the hosts' failover
    fault_recover_min_s: PositiveFloat = 30.0            # timing.recover_s: load watched after the restore (reconnect)
    fault_region_min_mib: PositiveFloat = 1024.0         # load.region: the verified region, across every drive
    data_mismatches_max: NonNegativeInt = 0     # blocks read back wrong (fio verify) over the soak and fault runs
    trusted_signers: list[Fingerprint] = []     # not a threshold: the keys whose signature G4 accepts


Nqn = Annotated[str, Field(pattern=r"^nqn\.[0-9]{4}-[0-9]{2}\.\S{1,200}$", description="an NVMe Qualified Name")]
TransportAddress = Annotated[str, Field(pattern=r"^[0-9A-Za-z.:%_-]{1,100}$",
                                        description="a port's transport address (traddr): an IP address")]


class ArrayTable(InputModel):
    """[array]: the array under acceptance, as its hosts see it, and the acceptance period. Each G2-G4 run that
    touched an array (line efficiency, multi-node read-back, soak, fault runs) must have measured it; nothing named:
    the runs must have measured one and the same array, the one printed (see fxprobe.gates.array)."""

    name: str = Field("", max_length=100, description="the array's name, printed")
    nqns: list[Nqn] = Field([], description="its NVMe subsystem NQNs (`nvme list-subsys` on a host)")
    addresses: list[TransportAddress] = Field([], description="its data ports' addresses (traddr, --peer)")
    period_from: date | None = Field(None, description="first day (UTC) of the acceptance period")
    period_until: date | None = Field(None, description="last day (UTC) of the acceptance period")

    _period = beside("period_until", "period_from", lambda until, since: (
        f"is before period_from ({until} < {since}); write period_from <= period_until"
        if until is not None and since is not None and until < since else None))


GATE_TABLES = {"g1": G1Thresholds, "g2": G2Thresholds, "g3": G3Thresholds, "g4": G4Thresholds}
NOT_THRESHOLDS = {"arrays", "trusted_signers", "concurrency_levels"}       # lists that name things: never scaled, never left out
THRESHOLD_KEYS = tuple(f"{gate}.{key}" for gate, model in GATE_TABLES.items() for key in model.model_fields
                       if key not in NOT_THRESHOLDS)
# thresholds one criterion is judged with together: a lab scale leaves all of them out or none
# (tests/test_lab_scale.py checks these against the gate catalog's criteria)
JUDGED_TOGETHER = (("g1.spare_min_pct", "g1.spare_unaccounted_max"),
                   ("g2.line_efficiency_min_pct", "g2.line_rate_gbps"),
                   ("g3.ttft_reduction_min_pct", "g3.throughput_gain_min_pct", "g3.throughput_gain_max_pct"),
                   ("g3.nic_ceiling_min_pct", "g3.nic_ceiling_gbps", "g3.readback_working_set_min_gib"))
ThresholdKey = Annotated[str, Field(pattern=r"^g[1-4]\.[a-z0-9_]+$", description="a threshold, gate.key")]
Reason = Annotated[str, Field(min_length=1, description="why, printed beside the value")]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="a file's SHA-256: 64 lowercase hex digits")]


class TrustedBuild(InputModel):
    """One program the buyer trusts by its SHA-256 although no Debian package installed it unchanged."""

    sha256: Sha256
    why: Reason          # printed in the report beside every run whose figures it printed


class ProvenanceTable(InputModel):
    """[provenance]: a report is ACCEPTED only when every measuring program its evidence ran is a Debian package's
    unchanged file (dpkg's md5) or a build named here by SHA-256 (fio built from a release tag, another
    distribution's package on an RPM host), and every benchmark file G2/G3 compared was written under an
    ``fxprobe benchmark`` run or is named here by SHA-256 (``admitted_files``: the buyer watched it being made);
    not a threshold, never a departure from the buyer's defaults."""

    trusted_builds: list[TrustedBuild] = []
    admitted_files: list[TrustedBuild] = []    # benchmark files no fxprobe benchmark run witnessed, admitted by SHA-256


class LedgerCheckpoint(InputModel):
    """A line of a machine's ledger the buyer's witness noted (``fxprobe ledger`` prints it): found again where it
    was, the ledger was not begun again or rewritten before it since."""

    host: Annotated[str, Field(min_length=1, max_length=253,
                               description="the machine's name, as fxprobe ledger printed it")]
    seq: PositiveInt
    sha256: Sha256
    noted: Reason        # who noted it, and when


class LedgerTable(InputModel):
    """[ledger]: the machines' ledger lines the buyer's witness noted (docs/gates.md); not a threshold, never a
    departure from the buyer's defaults."""

    checkpoints: list[LedgerCheckpoint] = []


def _unknown_keys(mapping: dict, _lab: bool) -> str | None:
    unknown = [key for key in mapping if key not in THRESHOLD_KEYS]
    return f"{', '.join(unknown)}: not a threshold; thresholds: {', '.join(THRESHOLD_KEYS)}" if unknown else None


def _lab_only(what: str):
    def problem(mapping: dict, lab_scaled: bool) -> str | None:
        if mapping and not lab_scaled:
            return (f"{what} ({', '.join(mapping)}) only in a lab-scaled file: set [scale] lab_scaled = true, and "
                    "every gate judged with it is printed as lab-scaled, never as the buyer's thresholds")
        return _unknown_keys(mapping, lab_scaled)
    return problem


def _partial_groups(not_judged: dict) -> str | None:
    for group in JUDGED_TOGETHER:
        named = [key for key in group if key in not_judged]
        if named and len(named) < len(group):
            return (f"{', '.join(named)} is judged together with {', '.join(k for k in group if k not in named)} "
                    "in one criterion: leave all of them out or none")
    return None


class ScaleTable(InputModel):
    """[scale]: whether these are the buyer's thresholds or scaled for a lab, and each departure with its reason."""

    model_config = ConfigDict(**InputModel.model_config, json_schema_extra={      # the same rule for other tools
        "if": {"not": {"properties": {"lab_scaled": {"const": True}}, "required": ["lab_scaled"]}},
        "then": {"properties": {"scaled": {"maxProperties": 0}, "not_judged": {"maxProperties": 0}}}})

    lab_scaled: bool = Field(False, description="true: NOT the buyer's thresholds; tables print as lab-scaled")
    why: str = Field("", description="what the scale is for (lab-scaled files: required)")
    scaled: dict[ThresholdKey, Reason] = Field(
        {}, description="lab-scaled files: every threshold that differs from the buyer's, and why")
    not_judged: dict[ThresholdKey, Reason] = Field(
        {}, description="lab-scaled files: criteria left out, by the thresholds they are judged with, and why")

    _why = beside("why", "lab_scaled", lambda why, lab: (
        "a lab-scaled file says what its scale is for (why = \"...\")" if lab and not why.strip() else None))
    _scaled = beside("scaled", "lab_scaled", _lab_only("scaled thresholds"))
    _not_judged = beside("not_judged", "lab_scaled", lambda left, lab: (
        _lab_only("criteria left out")(left, lab) or _partial_groups(left)))


def _departures(scale: ScaleTable, info: ValidationInfo) -> ScaleTable:
    """In a lab-scaled file every threshold that differs from the buyer's has a reason in [scale.scaled], every
    reason there is for a threshold that differs, and a criterion left out keeps the buyer's value."""
    if not scale.lab_scaled:
        return scale
    values = {f"{gate}.{key}": value for gate in GATE_TABLES if gate in info.data
              for key, value in info.data[gate].model_dump().items()}
    differs = {key for key in THRESHOLD_KEYS if key in values and values[key] != BUYER[key]}
    problems = [f"{key} = {values[key]:g} differs from the buyer's {BUYER[key]:g} with no reason in "
                "[scale.scaled]: add one (it is printed beside the value)" for key in sorted(differs - set(scale.scaled))
                if key not in scale.not_judged]
    problems += [f"{key} is listed as scaled but keeps the buyer's {BUYER[key]:g}: remove it from [scale.scaled]"
                 for key in scale.scaled if key in values and key not in differs]   # a gate table in error: not here
    problems += [f"{key} is not judged here: keep the buyer's value ({BUYER[key]:g}), not {values[key]:g}"
                 for key in scale.not_judged if key in differs]
    problems += [f"{key} is both scaled and not judged: one or the other" for key in scale.scaled
                 if key in scale.not_judged]
    if problems:
        raise ValueError(problems[0])
    return scale


class GatesFile(InputModel):
    """gates.toml: one table per gate; a key left out keeps the buyer's default. ``[scale]`` says whether the file
    is the buyer's (the default) or lab-scaled, and why each lab-scaled value departs from the buyer's."""

    g1: G1Thresholds = G1Thresholds()
    g2: G2Thresholds = G2Thresholds()
    g3: G3Thresholds = G3Thresholds()
    g4: G4Thresholds = G4Thresholds()
    array: ArrayTable = ArrayTable()
    provenance: ProvenanceTable = ProvenanceTable()
    ledger: LedgerTable = LedgerTable()
    scale: ScaleTable = ScaleTable()

    _departures = field_validator("scale")(classmethod(lambda cls, scale, info: _departures(scale, info)))


NOT_GATES = {"array", "provenance", "ledger"}      # tables that name things, not thresholds
DEFAULTS: dict[str, dict[str, float]] = GatesFile().model_dump(exclude={"scale", *NOT_GATES})
BUYER: dict[str, float] = {f"{gate}.{key}": value for gate, table in DEFAULTS.items() for key, value in table.items()
                           if f"{gate}.{key}" in THRESHOLD_KEYS}     # the buyer's thresholds (docs/gates.md)
NO_SCALE: dict = ScaleTable().model_dump()
NAMES_ONLY = {"arrays", "trusted_signers"}      # name things the buyer adds (arrays, signers): never a departure
CUSTOM = "custom thresholds"


def _shown(value) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def departures(values: dict) -> list[tuple[str, object, object]]:
    """(gate.key, the buyer's default, this value) for every value that differs from the buyer's defaults
    (docs/gates.md): the thresholds, and G3's concurrency levels (fewer levels judge less)."""
    out = []
    for gate, table in DEFAULTS.items():
        given = values.get(gate) if isinstance(values, dict) and isinstance(values.get(gate), dict) else {}
        out += [(f"{gate}.{key}", default, given[key]) for key, default in table.items()
                if key not in NAMES_ONLY and key in given and given[key] != default]
    return out


def departure_text(key: str, default, value) -> str:
    return f"{key} = {_shown(value)} (the buyer's {_shown(default)})"


@dataclass(frozen=True)
class GateConfig:
    values: dict[str, dict[str, float]] = field(default_factory=lambda: {k: dict(v) for k, v in DEFAULTS.items()})
    source: str = "built-in defaults"
    scale: dict = field(default_factory=lambda: dict(NO_SCALE))      # ScaleTable, dumped
    array: ArrayTable = ArrayTable()                                   # the array under acceptance ([array])
    provenance: ProvenanceTable = ProvenanceTable()                    # builds trusted by SHA-256 ([provenance])
    ledger: LedgerTable = LedgerTable()                                # ledger lines a witness noted ([ledger])

    def get(self, gate: str, key: str) -> float:
        try:
            return self.values[gate][key]
        except KeyError:
            raise BadInput(f"gate config: no threshold {gate}.{key}") from None

    @property
    def lab_scaled(self) -> bool:
        return bool(self.scale.get("lab_scaled"))

    def departures(self) -> list[tuple[str, object, object]]:
        """Every value that differs from the buyer's defaults: (gate.key, default, value)."""
        return departures(self.values)

    @property
    def custom(self) -> bool:
        """Not the buyer's and not declared lab-scaled: a file (./gates.toml too) that departs from the defaults."""
        return not self.lab_scaled and bool(self.departures())

    def to_dict(self) -> dict:
        data = {"source": self.source, "lab_scaled": self.lab_scaled, "thresholds": self.values,
                "array": self.array.model_dump(mode="json"), "provenance": self.provenance.model_dump(mode="json"),
                "ledger": self.ledger.model_dump(mode="json")}
        if self.lab_scaled:
            data.update(scale=self.scale, notes=self.scale_lines())
        elif self.custom:
            data.update(label=CUSTOM, notes=self.scale_lines(), custom=[
                {"key": key, "default": default, "value": value} for key, default, value in self.departures()])
        return data

    @property
    def label(self) -> str:
        """Which thresholds these are, in gate names: "" for the buyer's (gates.toml or the defaults), else the
        file's stem ("gates-lab"); a lab-scaled file is always named ("lab-scaled" if its stem is "gates"), so a
        lab-scaled table never passes for the buyer's, and a file departing from the buyer's defaults is always
        "custom thresholds", whatever its name."""
        stem = Path(self.source).stem if self.source != "built-in defaults" else ""
        if self.lab_scaled:
            return "lab-scaled" if stem in ("", "gates") else stem
        if self.custom:
            return CUSTOM
        return "" if stem in ("", "gates") else stem

    def not_judged(self, gate: str, keys: tuple[str, ...]) -> str | None:
        """Why a criterion judged with ``keys`` (of ``gate``) is left out here, or None: only when a lab-scaled
        file names every one of them in [scale.not_judged]."""
        names = [f"{gate}.{key}" for key in keys]
        left_out = self.scale.get("not_judged") or {}
        if not names or not all(name in left_out for name in names):
            return None
        return "; ".join(dict.fromkeys(left_out[name] for name in names))

    def scaled(self, gate: str, keys: tuple[str, ...]) -> list[str]:
        """``SCALED g2.line_rate_gbps = 0.02 (the buyer's 100): why`` for each of ``keys`` this file scaled; in a
        custom file ``CUSTOM g2.line_efficiency_min_pct = 60 (the buyer's 83)`` for each that departs."""
        if self.custom:
            names = {f"{gate}.{key}" for key in keys}
            return [f"CUSTOM {departure_text(*d)}" for d in self.departures() if d[0] in names]
        reasons = self.scale.get("scaled") or {}
        return [f"SCALED {gate}.{key} = {self.get(gate, key):g} (the buyer's {BUYER[f'{gate}.{key}']:g}): "
                f"{reasons[f'{gate}.{key}']}" for key in keys if f"{gate}.{key}" in reasons]

    def scale_lines(self) -> list[str]:
        """What this file is and every departure from the buyer's thresholds, one line each (none for the buyer's)."""
        if self.custom:
            found = self.departures()
            return [f"CUSTOM thresholds ({self.source}), not the buyer's: {len(found)} value"
                    f"{'s' * (len(found) != 1)} {'differ' if len(found) != 1 else 'differs'} from the buyer's defaults; a pass "
                    "here is not an acceptance"] + \
                [f"CUSTOM {departure_text(*d)}" for d in found]
        if not self.lab_scaled:
            return []
        lines = [f"LAB-SCALED thresholds ({self.source}), not the buyer's: {self.scale.get('why', '')}"]
        for name in self.scale.get("scaled") or {}:
            gate, key = name.split(".", 1)
            lines += self.scaled(gate, (key,))
        lines += [f"NOT JUDGED {name} (the buyer's {BUYER[name]:g}): {reason}"
                  for name, reason in (self.scale.get("not_judged") or {}).items()]
        return lines

    def arrays(self) -> tuple[str, ...]:
        return tuple(self.values.get("g1", {}).get("arrays") or ())

    def with_arrays(self, arrays: list[str]) -> "GateConfig":
        """The same thresholds with G1's array list replaced (``gate g1 --arrays``)."""
        values = {gate: dict(keys) for gate, keys in self.values.items()}
        values["g1"]["arrays"] = list(arrays)
        return GateConfig(values, self.source, self.scale, self.array, self.provenance, self.ledger)

    def trusted_signers(self) -> tuple[str, ...]:
        return tuple(self.values.get("g4", {}).get("trusted_signers") or ())


def parse_config(text: str, source: str) -> GateConfig:
    model = validate(GatesFile, parse_toml(text, source), source)
    values = model.model_dump(exclude=NOT_GATES)
    return GateConfig(values, source, values.pop("scale"), model.array, model.provenance, model.ledger)


def load_config(path: Path | None = None) -> GateConfig:
    """Thresholds from ``path``; without a path, ``./gates.toml`` if present, else the defaults."""
    if path is None:
        candidate = Path(DEFAULT_FILE)
        if not candidate.is_file():
            return GateConfig()
        path = candidate
    return parse_config(read_text(path, "gate config"), str(path))
