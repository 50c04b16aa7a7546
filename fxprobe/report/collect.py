"""Read run directories into what a report shows: verdicts, claims, and plottable series.

What a report reads from each run's ``results.json`` (all optional):
``verdict`` (one Verdict.to_dict()), ``gates`` (a list of them), ``claims`` (claim results),
``g3.comparisons`` (the G3 bar chart), ``timeseries`` ({name: {"t": [s], "v": [..], "unit"}}),
``latency_cdf`` ({name: {"x": [..], "p": [0..1], "unit"}}), ``events`` ([{"t": s, "label"}]:
fault timeline marks on the time series). Besides: a soak run's ``soak.jsonl`` records (bandwidth
over time with its interruptions) and any PNG a run saved itself (a fault run's ``timeline.png``).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from fxprobe.core.rundir import RunDir
from fxprobe.core.verdict import Verdict


@dataclass(frozen=True)
class RunView:
    path: Path
    results: dict
    verdicts: tuple[Verdict, ...]
    commands: tuple[str, ...] = ()     # every subprocess the run started (commands.jsonl), shell-quoted
    gates: tuple[Verdict, ...] = ()    # the verdicts of a `gate ...` run (`gate g3`: one, `gate all`: four)

    def bundle_path(self, text: str) -> str | None:
        """Where an evidence path of this run lives inside the report (``evidence/<run>/...``)."""
        text = text.strip()
        for prefix in (str(self.path) + "/", str(self.path.resolve()) + "/"):
            if text.startswith(prefix):
                text = text[len(prefix):]
                break
        else:
            if text.startswith("/"):
                return None
        candidate = self.path / text
        return f"evidence/{self.name}/{text}" if candidate.is_file() else None

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def command(self) -> str:
        return str(self.results.get("command", "?"))

    @property
    def outcome(self) -> str:
        return str(self.results.get("outcome", "?"))


verdict_from_dict = Verdict.from_dict     # one (de)serialization of criteria: fxprobe.core.verdict


def read_run(path: Path) -> RunView:
    run = RunDir.open(path)
    results = run.results()
    verdicts = []
    if isinstance(results.get("verdict"), dict):
        verdicts.append(verdict_from_dict(results["verdict"]))
    verdicts += [verdict_from_dict(item) for item in results.get("gates") or [] if isinstance(item, dict)]
    gates = tuple(verdicts) if str(results.get("command", "")).split(" ")[0] == "gate" else ()
    if not verdicts and isinstance(results.get("criteria"), list):   # e.g. a fault run: "verdict" is a word
        word = results.get("verdict") if isinstance(results.get("verdict"), str) else ""
        name = f"{results.get('command', run.path.name)}" + (f" ({word})" if word else "")
        verdicts.append(verdict_from_dict({"name": name, "criteria": results["criteria"]}))
    commands = []
    for record in run.commands():
        argv = record.get("argv")
        if isinstance(argv, list):
            host = record.get("host")
            prefix = f"[{host}] " if isinstance(host, str) and host not in ("", "local") else ""
            commands.append(prefix + shlex.join(str(a) for a in argv))
    return RunView(run.path, results, tuple(verdicts), tuple(commands), gates)


SOAK_RECORDS = "soak.jsonl"
MAX_POINTS = 4000


def _bucket_min(samples: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """At most MAX_POINTS points; each keeps its bucket's minimum so a dip stays visible (72 h of 1 s samples)."""
    if len(samples) <= MAX_POINTS:
        return samples
    size = -(-len(samples) // MAX_POINTS)
    return [(samples[i][0], min(v for _, v in samples[i:i + size])) for i in range(0, len(samples), size)]


def soak_series(run: RunView) -> tuple[dict, list[dict]]:
    """Bandwidth over time and interruption marks from a soak run's ``soak.jsonl`` records.

    Sample records: ``{"type": "sample", "ts": epoch s, "bw": bytes/s}``; interruptions:
    ``{"type": "interruption", "start_ts": epoch s, "kind": ...}``. Unreadable lines are skipped
    (a crash can leave a partial last line).
    """
    path = run.path / str(run.results.get("records") or SOAK_RECORDS)
    if not path.is_file():
        return {}, []
    samples, events = [], []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(record, dict):
                continue
            if record.get("type") == "sample" and isinstance(record.get("ts"), (int, float)) \
                    and isinstance(record.get("bw"), (int, float)):
                samples.append((record["ts"], record["bw"] / 1e6))
            elif record.get("type") == "interruption" and isinstance(record.get("start_ts"), (int, float)):
                events.append((record["start_ts"], str(record.get("kind", "interruption"))))
    if not samples:
        return {}, []
    samples = _bucket_min(samples)
    origin = samples[0][0]
    series = {"soak bandwidth": {"t": [t - origin for t, _ in samples], "v": [v for _, v in samples], "unit": "MB/s"}}
    return series, [{"t": t - origin, "label": label} for t, label in events]
