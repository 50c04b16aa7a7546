"""Advice and information the runs computed, in the report: a soak's interruptions, timeout advice after a link
fault, what a drive pull cost while the array was degraded and rebuilding, the lab's emulated drives that timed out
during a fault run, and the lab's scale (the
reproducibility risks are in :mod:`fxprobe.report.machines`).

Each note names the run it came from and links its results.json.
"""

from __future__ import annotations

from dataclasses import dataclass

from fxprobe.core.verdict import format_number
from fxprobe.report.collect import RunView
from fxprobe.report.evidence import Link, href
from fxprobe.report.headline import custom_values
from fxprobe.report.soakview import soak_of
from fxprobe.tools import dmesg
from fxprobe.workload.witness import file_notes


@dataclass(frozen=True)
class Note:
    topic: str                     # "soak interruptions", "timeout advice", "degraded array", "lab scale"
    title: str
    lines: tuple[str, ...]
    source: Link | None = None


def _results_link(run: RunView) -> Link:
    return Link(f"{run.name}/results.json", href(run, "results.json"))


def timeout_advice(run: RunView) -> Note | None:
    advice = run.results.get("advice")
    if run.command != "fault run" or not isinstance(advice, dict) or not advice.get("lines"):
        return None
    word = run.results.get("verdict") if isinstance(run.results.get("verdict"), str) else run.outcome
    title = f"NVMe timeouts after the {run.results.get('plan', {}).get('kind', 'link')} fault ({word})"
    return Note("timeout advice", title, tuple(str(line) for line in advice["lines"]), _results_link(run))


def _md_changes(changes: list, inject_s: float | None) -> list[str]:
    lines, seen = [], {}
    for change in changes if isinstance(changes, list) else []:
        if not isinstance(change, dict) or not isinstance(change.get("md"), dict):
            continue
        for name, state in change["md"].items():
            if seen.get(name) != state:
                at = f"at {change['t'] - inject_s:+.1f} s from the fault" if inject_s and \
                    isinstance(change.get("t"), (int, float)) else "sampled"
                lines.append(f"{name}: {state} ({at})")
                seen[name] = state
    return lines


def degraded_figures(run: RunView) -> Note | None:
    """A drive pull: throughput and p99 while the array ran degraded, recovery, the md states it went through."""
    plan = run.results.get("plan") if isinstance(run.results.get("plan"), dict) else {}
    impact = run.results.get("impact") if isinstance(run.results.get("impact"), dict) else {}
    if run.command != "fault run" or plan.get("kind") != "drive-pull" or not impact:
        return None
    lines = []
    if isinstance(impact.get("throughput_pct"), (int, float)):
        lines.append(f"throughput while degraded: {format_number(impact['throughput_pct'], '%')} of the baseline "
                     f"({format_number(impact.get('window_iops'))} vs {format_number(impact.get('baseline_iops'))} IOPS)")
    if isinstance(impact.get("p99_ratio"), (int, float)):
        lines.append(f"p99 latency while degraded: x{format_number(impact['p99_ratio'])} "
                     f"({format_number((impact.get('window_p99_ns') or 0) / 1e6, 'ms')} vs "
                     f"{format_number((impact.get('baseline_p99_ns') or 0) / 1e6, 'ms')})")
    if impact.get("recover_s") is not None:
        lines.append(f"load back to its baseline {format_number(impact['recover_s'], 's')} after the restore")
    inject = impact.get("inject_ms") / 1000 if isinstance(impact.get("inject_ms"), (int, float)) else None
    lines += _md_changes((run.results.get("timeline") or {}).get("changes"), inject)
    rebuild = run.results.get("rebuild")
    if isinstance(rebuild, dict):
        from fxprobe.faults.rebuild import Rebuild
        lines += [line.strip() for line in Rebuild.from_dict(rebuild).lines()]
    return Note("degraded array", f"drive pull {plan.get('target', '')}: the array degraded and rebuilding",
                tuple(lines), _results_link(run)) if lines else None


def soak_interruptions(run: RunView) -> Note | None:
    """Every interruption of a soak: its kind, when (h from the start of the load), how long, what was seen."""
    view = soak_of(run.path, run.results) if run.command == "soak" else None
    if view is None or not view.interruptions:
        return None
    lines = tuple(f"{i.kind} at {i.start_h:.4f} h" + (f" for {format_number(i.seconds, 's')}" if i.seconds else "")
                  + (f": {i.detail}" if i.detail else "") for i in view.interruptions)
    return Note("soak interruptions", f"soak {run.name}: {len(lines)} interruption(s)", lines, _results_link(run))


def is_lab(run: RunView) -> bool:
    argv = run.results.get("argv") if isinstance(run.results.get("argv"), list) else []
    return bool(run.results.get("lab")) or "--lab" in argv or str(run.results.get("run_dir", "")).startswith("/fxlab/")


def lab_scale(runs: list[RunView], gate_results: list[dict]) -> Note | None:
    """Which runs are lab runs, and every lab-scaled gates file's departures from the buyer's thresholds: what it
    is for, each SCALED value and each criterion NOT JUDGED, with its reason (as the gate run recorded them)."""
    lab = [run.name for run in runs if is_lab(run)]
    lines = [f"{len(lab)} of the {len(runs)} runs ran in fxprobe's QEMU lab ({', '.join(lab)}): emulated NVMe "
             "drives and links on a virtual machine, so their figures show that each procedure works end to end, "
             "not what an array in production delivers."] if lab else []
    for results in gate_results:
        block = results.get("thresholds") if isinstance(results.get("thresholds"), dict) else {}
        for note in block.get("notes") or block.get("scale_notes") or []:
            if str(note) not in lines and not str(note).startswith("CUSTOM"):
                lines.append(str(note))
    return Note("lab scale", "Lab scale", tuple(lines)) if lines else None


def custom_thresholds(gate_results: list[dict]) -> Note | None:
    """Every value a gate run was judged with that departs from the buyer's defaults (a custom gates file)."""
    lines = []
    for results in gate_results:
        block = results.get("thresholds") if isinstance(results.get("thresholds"), dict) else {}
        lines += [f"CUSTOM {text} ({block.get('source', '?')})" for text in custom_values(results)
                  if f"CUSTOM {text} ({block.get('source', '?')})" not in lines]
    return Note("custom thresholds", "Custom thresholds (not the buyer's)", tuple(lines)) if lines else None


def benchmark_files(run: RunView) -> Note | None:
    """What a gate g2/g3 run said of each benchmark file it compared: witnessed or handed over, and what its
    figures were checked against."""
    lines = tuple(f"{source}: {note}" for source, note, _ in file_notes(run.results))
    return Note("benchmark files", f"Benchmark files {run.name} compared", lines, _results_link(run)) if lines else None


def lab_drive_timeouts(run: RunView) -> Note | None:
    """A lab fault run during which the array guest's emulated drives timed out (the lab's emulator, not the fault)."""
    timeouts = run.results.get("lab_drive_timeouts")
    lines = tuple(dmesg.timeout_lines(timeouts)) if run.command == "fault run" and isinstance(timeouts, list) else ()
    return Note("lab emulator", f"{dmesg.EMULATOR_STALLED}: {run.name}", lines, _results_link(run)) if lines else None


def notes(runs: list[RunView], gate_results: list[dict]) -> list[Note]:
    out = [n for run in runs for n in (soak_interruptions(run), timeout_advice(run), degraded_figures(run),
                                       benchmark_files(run), lab_drive_timeouts(run)) if n is not None]
    scale, custom = lab_scale(runs, gate_results), custom_thresholds(gate_results)
    return out + [note for note in (scale, custom) if note]
