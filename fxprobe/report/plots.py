"""matplotlib figures for a report, returned as PNG bytes (Agg backend, no display needed)."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

from fxprobe.core.verdict import Outcome, Verdict, format_number  # noqa: E402

COLOURS = {Outcome.PASS: "#2e7d32", Outcome.FAIL: "#c62828", Outcome.NOT_RUN: "#9e9e9e", Outcome.ERROR: "#6a1b9a"}


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight", metadata={"Software": None})
    plt.close(figure)
    return buffer.getvalue()


def gate_summary(verdicts: list[tuple[str, Verdict]], title: str = "Gate criteria") -> bytes | None:
    """Margin of every numeric criterion (positive = inside the threshold), coloured by outcome and labelled
    with its value and unit; one row per (label, criterion), so two runs' criteria never share a bar."""
    rows = [(f"{label} {c.name}".strip(), c.margin, c.outcome, c.unit)
            for label, v in verdicts for c in v.criteria if c.margin is not None]
    if not rows:
        return None
    figure, axes = plt.subplots(figsize=(10, 0.3 * len(rows) + 1.4))
    positions = list(range(len(rows)))[::-1]
    axes.barh(positions, [r[1] for r in rows], color=[COLOURS[r[2]] for r in rows])
    axes.set_yticks(positions, [r[0] if len(r[0]) <= 60 else r[0][:57] + "..." for r in rows])
    for y, (_, margin, outcome, unit) in zip(positions, rows):
        axes.annotate(f"{format_number(margin, unit)} {outcome.value}", (max(margin, 0), y), fontsize=6,
                      va="center", xytext=(3, 0), textcoords="offset points", ha="left")
    axes.axvline(0, color="black", linewidth=0.8)
    low, high = axes.get_xlim()
    axes.set_xlim(low, high + 0.15 * (high - low))      # room for the labels right of each bar or of 0
    axes.set_xlabel("margin to threshold (unit of each criterion; < 0 fails)")
    axes.set_title(title)
    axes.tick_params(axis="y", labelsize=7)
    return _png(figure)


def g3_changes(comparisons: list[dict], ttft_min: float | None, band: tuple[float, float] | None) -> bytes | None:
    """TTFT reduction and throughput gain per concurrency, with the thresholds drawn."""
    if not comparisons:
        return None
    labels = sorted({c["label"] for c in comparisons}, key=lambda s: (len(s), s))
    figure, axes = plt.subplots(figsize=(7, 3.5))
    width = 0.8 / max(1, len({c["metric"] for c in comparisons}))
    for offset, metric in enumerate(sorted({c["metric"] for c in comparisons})):
        values = {c["label"]: c["change_pct"] for c in comparisons if c["metric"] == metric}
        xs = [i + offset * width for i, label in enumerate(labels) if label in values]
        ys = [values[label] for label in labels if label in values]
        bars = axes.bar(xs, ys, width, label=metric)
        axes.bar_label(bars, fmt="%.1f", fontsize=7)
    if ttft_min is not None:
        axes.axhline(ttft_min, color="#1565c0", linestyle="--", linewidth=0.8, label=f"TTFT min {ttft_min:g} %")
    if band is not None:
        axes.axhspan(band[0], band[1], color="#ffb300", alpha=0.15, label=f"gain band {band[0]:g}...{band[1]:g} %")
    axes.set_xticks([i + width * 0.5 for i in range(len(labels))], labels)
    axes.set_ylabel("%")
    axes.set_title("G3: candidate vs baseline")
    axes.legend(fontsize=7)
    return _png(figure)


def time_series(series: dict, events: list[dict]) -> bytes | None:
    """Bandwidth (or any metric) over time, with fault/interruption events as vertical lines."""
    usable = {name: s for name, s in (series or {}).items() if isinstance(s, dict) and s.get("t") and s.get("v")}
    if not usable:
        return None
    figure, axes = plt.subplots(figsize=(8, 3.5))
    for name, s in usable.items():
        axes.plot(s["t"], s["v"], label=f"{name} ({s.get('unit', '')})", linewidth=0.9)
    for event in events or []:
        if isinstance(event, dict) and isinstance(event.get("t"), (int, float)):
            axes.axvline(event["t"], color="#c62828", linestyle=":", linewidth=0.9)
            axes.annotate(str(event.get("label", "")), (event["t"], axes.get_ylim()[1]), fontsize=7,
                          rotation=90, va="top", ha="right")
    axes.set_xlabel("time (s)")
    axes.set_title("Over time (red: events)")
    axes.legend(fontsize=7)
    return _png(figure)


def latency_cdfs(cdfs: dict) -> bytes | None:
    usable = {name: c for name, c in (cdfs or {}).items() if isinstance(c, dict) and c.get("x") and c.get("p")}
    if not usable:
        return None
    figure, axes = plt.subplots(figsize=(7, 3.5))
    for name, c in usable.items():
        axes.plot(c["x"], c["p"], label=f"{name} ({c.get('unit', '')})")
    axes.set_xscale("log")
    axes.set_ylabel("fraction of I/Os")
    axes.set_title("Latency CDF")
    axes.legend(fontsize=7)
    return _png(figure)
