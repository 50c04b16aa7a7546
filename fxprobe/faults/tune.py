"""``fault tune``: measured timeout advice. Runs a link-cut scenario under each host-side setting
(keep_alive_tmo, fast_io_fail_tmo, reconnect_delay, ctrl_loss_tmo) and transport (tcp, rdma), a few
repeats each, every repeat a full fault run with its own run folder under ``trials/``; then a
table of stall, errors and throughput per setting, the best one, and whether it meets the scenario's
criteria. The advice after a visible link cut quotes the latest tune (``latest_tune``).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from fxprobe.core.verdict import format_number

COMMAND = "fault tune"
FOLDER = "fault-tune"
SETTING_KEYS = ("keep_alive_tmo", "reconnect_delay", "ctrl_loss_tmo", "fast_io_fail_tmo")
# as connected (nvme-cli defaults: kato 5 s, reconnect 10 s, ctrl_loss 600 s, fast_io_fail off), the advice, faster
SETTINGS: tuple[dict, ...] = (
    {},
    {"keep_alive_tmo": 2, "reconnect_delay": 1, "ctrl_loss_tmo": 60, "fast_io_fail_tmo": 5},
    {"keep_alive_tmo": 1, "reconnect_delay": 1, "ctrl_loss_tmo": 30, "fast_io_fail_tmo": 0},
)
TRANSPORTS = ("tcp", "rdma")


def setting_label(setting: dict) -> str:
    if not setting:
        return "as connected (defaults)"
    short = {"keep_alive_tmo": "kato", "reconnect_delay": "reconnect_delay", "ctrl_loss_tmo": "ctrl_loss_tmo",
             "fast_io_fail_tmo": "fast_io_fail_tmo"}
    return ", ".join(f"{short[k]} {setting[k]}" for k in SETTING_KEYS if k in setting)


def parse_setting(text: str) -> dict:
    """``kato=2,reconnect_delay=1,ctrl_loss_tmo=60,fast_io_fail_tmo=5`` (``defaults``: as connected)."""
    from fxprobe.core.errors import BadInput
    if text.strip() in ("defaults", ""):
        return {}
    alias = {"kato": "keep_alive_tmo"}
    out = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        key = alias.get(key.strip(), key.strip())
        if key not in SETTING_KEYS or not value.strip().lstrip("-").isdigit():
            raise BadInput(f"--setting {text!r}: expected KEY=INT,... with keys kato (keep_alive_tmo), "
                           f"reconnect_delay, ctrl_loss_tmo, fast_io_fail_tmo, or 'defaults'")
        out[key] = int(value)
    return out


def variant(scenario, transport: str, setting: dict):
    """The scenario with this transport and these timeouts in its [lab] table."""
    lab = dict(scenario.lab)
    lab.update({"transport": transport, "keep_alive_tmo": 0, "ctrl_loss_tmo": 0, "reconnect_delay": 0,
                "fast_io_fail_tmo": -2})
    lab.update(setting)
    return dataclasses.replace(scenario, lab=lab)


@dataclass(frozen=True)
class Trial:
    transport: str
    setting: dict
    repeat: int
    verdict: str                  # invisible / visible / error
    stall_s: float | None
    errors: int | None
    throughput_pct: float | None
    run_dir: str
    error: str = ""


def trial_from_results(transport: str, setting: dict, repeat: int, results: dict, run_dir: str) -> Trial:
    impact = results.get("impact") or {}
    return Trial(transport, setting, repeat, results.get("verdict", "error"), impact.get("longest_stall_s"),
                 impact.get("errors"), impact.get("throughput_pct"), run_dir)


@dataclass(frozen=True)
class Row:
    transport: str
    setting: dict
    trials: int
    invisible: int
    stalls: tuple[float | None, ...]
    errors: int
    throughput_min_pct: float | None
    failed_runs: int

    @property
    def stall_max(self) -> float | None:
        known = [s for s in self.stalls if s is not None]
        return max(known) if known and len(known) == len(self.stalls) else None

    @property
    def stall_median(self) -> float | None:
        known = [s for s in self.stalls if s is not None]
        return statistics.median(known) if known else None

    def to_dict(self) -> dict:
        return {**asdict(self), "label": setting_label(self.setting), "stall_max_s": self.stall_max,
                "stall_median_s": self.stall_median}

    def line(self) -> str:
        stalls = "/".join(f"{s:.1f}" if s is not None else "?" for s in self.stalls)
        thr = format_number(self.throughput_min_pct, "%") if self.throughput_min_pct is not None else "?"
        return (f"{self.transport:4} {setting_label(self.setting):61} stall {stalls} s, errors {self.errors}, "
                f"throughput min {thr}, invisible {self.invisible}/{self.trials}"
                + (f", {self.failed_runs} run(s) failed" if self.failed_runs else ""))


def table(trials: list[Trial]) -> list[Row]:
    """One row per (transport, setting), in the order first run."""
    keys: list[tuple[str, str]] = []
    groups: dict[tuple[str, str], list[Trial]] = {}
    for t in trials:
        key = (t.transport, json.dumps(t.setting, sort_keys=True))
        if key not in groups:
            keys.append(key)
        groups.setdefault(key, []).append(t)
    rows = []
    for key in keys:
        group = groups[key]
        ran = [t for t in group if t.verdict != "error"]
        thr = [t.throughput_pct for t in ran if t.throughput_pct is not None]
        rows.append(Row(group[0].transport, group[0].setting, len(group), sum(t.verdict == "invisible" for t in group),
                        tuple(t.stall_s for t in group), sum(t.errors or 0 for t in ran),
                        min(thr) if thr else None, len(group) - len(ran)))
    return rows


def best(rows: list[Row]) -> Row | None:
    """Most repeats invisible, then no errors, then the shortest longest stall, then the highest throughput."""
    usable = [r for r in rows if r.stall_max is not None and r.failed_runs == 0]
    if not usable:
        return None
    return min(usable, key=lambda r: (-r.invisible, r.errors > 0, r.stall_max, -(r.throughput_min_pct or 0)))


def summary(rows: list[Row], max_stall_s: float) -> dict:
    top = best(rows)
    meets = bool(top and top.invisible == top.trials)
    return {"rows": [r.to_dict() for r in rows], "best": top.to_dict() if top else None,
            "meets_criteria": meets, "max_stall_s": max_stall_s}


def lines(data: dict) -> list[str]:
    out = [Row(**{k: v for k, v in r.items() if k in Row.__dataclass_fields__}).line() for r in data["rows"]]
    top = data.get("best")
    if top:
        out.append(f"best: {top['transport']} {top['label']}: longest stall {top['stall_max_s']:.1f} s "
                   f"(need <= {format_number(data['max_stall_s'], 's')}), invisible {top['invisible']}/{top['trials']}"
                   + ("" if data["meets_criteria"] else "; no setting met the scenario's criteria in every repeat"))
    else:
        out.append("best: none (no setting finished every repeat)")
    return out


def latest_tune(base: Path) -> tuple[Path, dict] | None:
    """The newest finished ``fault tune`` run under the runs folder ``base`` (its folder and results)."""
    base = Path(base)
    if not base.is_dir():
        return None
    for folder in sorted(base.glob(f"*-{FOLDER}*"), reverse=True):
        try:
            data = json.loads((folder / "results.json").read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if data.get("command") == COMMAND and data.get("tune"):
            return folder, data
    return None


def tune_advice(base: Path) -> list[str]:
    """What the latest tune measured, for the advice after a visible link cut (or that none exists)."""
    found = latest_tune(base)
    if found is None:
        return [f"no fault tune in {base}: the timeouts above are not measured advice "
                f"(fxprobe fault tune link-down --lab NAME measures them)"]
    folder, data = found
    tune = data["tune"]
    top = tune.get("best")
    if not top:
        return [f"latest fault tune ({folder}, {data.get('finished', '?')}): no setting finished every repeat"]
    return [f"latest fault tune ({folder}, {data.get('finished', '?')}): best {top['transport']} {top['label']}: "
            f"longest stall {top['stall_max_s']:.1f} s over {top['trials']} repeat(s), invisible "
            f"{top['invisible']}/{top['trials']}" + ("" if tune.get("meets_criteria") else
                                                    "; no measured setting met the criteria")]


def run_tune(scenario, lab_name: str, run, journal, transports=TRANSPORTS, settings=SETTINGS, repeats: int = 3,
             progress=print) -> tuple[dict, list[Trial]]:
    """Every (transport, setting) ``repeats`` times, each a fault run in ``run/trials/``; the summary and
    the trials. A restore that fails ends the tune (the lab is no longer in a known state)."""
    from fxprobe.core.errors import FxprobeError
    from fxprobe.core.rundir import RunDir
    from fxprobe.core.runner import Runner
    from fxprobe.core.verdict import Outcome
    from fxprobe.faults import engine
    from fxprobe.faults.analysis import OUTCOME_OF_VERDICT
    from fxprobe.faults.restored import RestoreFailed
    trials: list[Trial] = []
    total = len(transports) * len(settings) * repeats
    broken = None
    for transport in transports:
        for number, setting in enumerate(settings):
            for repeat in range(1, repeats + 1):
                if broken:
                    break
                progress(f"tune {len(trials) + 1}/{total}: {transport}, {setting_label(setting)}, repeat {repeat}")
                trial = RunDir.start("fault run", [], base=run.path / "trials",
                                     folder=f"{transport}-setting{number}-r{repeat}")
                options = engine.Options(lab=lab_name, progress=progress)
                try:
                    plan = engine.build_plan(variant(scenario, transport, setting), Runner(trial), options)
                    results = engine.execute(plan, trial, journal, options)
                except FxprobeError as exc:
                    trial.finish(Outcome.ERROR, {"error": str(exc)}, reason=str(exc), command="fault run")
                    trials.append(Trial(transport, setting, repeat, "error", None, None, None, str(trial.path),
                                        str(exc)))
                    progress(f"  error: {exc}")
                    if isinstance(exc, RestoreFailed):
                        broken = str(exc)
                    continue
                trial.finish(OUTCOME_OF_VERDICT[results["verdict"]], results, command="fault run")
                trials.append(trial_from_results(transport, setting, repeat, results, str(trial.path)))
                last = trials[-1]
                progress(f"  {last.verdict}: stall {format_number(last.stall_s, 's') if last.stall_s is not None else '?'}"
                         f", errors {last.errors}")
    data = summary(table(trials), scenario.criteria["max_stall_s"])
    data["stopped"] = broken
    return data, trials
