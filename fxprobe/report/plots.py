"""matplotlib figures for a report, as PNG bytes at 150 dpi (Agg backend, no display needed).

- :func:`gate_grid`: every criterion of the gates (yes/no ones included), its outcome, measured beside
  threshold, and its margin as a fraction of its own threshold (a % of 72 h and a % of 8 nodes share an axis);
- :func:`soak`: bandwidth over hours, mean and minimum per bucket, interruptions marked by kind;
- :func:`g3_changes`: TTFT reduction and throughput gain per concurrency against the thresholds.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
from matplotlib.patches import Patch  # noqa: E402

from fxprobe.core.verdict import Criterion, Outcome, format_number  # noqa: E402
from fxprobe.report.ceilings import artefact  # noqa: E402
from fxprobe.report.soakview import SoakView  # noqa: E402

DPI = 150
COLOURS = {"pass": "#2e7d32", "fail": "#c62828", "not run": "#757575", "error": "#6a1b9a", "artefact": "#ef6c00",
           "not judged": "#1565c0"}
KIND_COLOURS = ("#c62828", "#ef6c00", "#6a1b9a", "#1565c0", "#795548", "#00838f")


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    plt.close(figure)
    return buffer.getvalue()


@dataclass(frozen=True)
class GridRow:
    gate: str                  # "G4"
    criterion: Criterion
    left_out: bool = False     # a criterion a lab-scaled thresholds file does not judge (its name only, no figure)

    @property
    def word(self) -> str:
        if self.left_out:
            return "not judged"
        return "artefact" if artefact(self.criterion) else self.criterion.outcome.value

    @property
    def fraction(self) -> float | None:
        """Margin over |threshold| (+0.16 = 16 % inside it); None for yes/no criteria and a threshold of 0."""
        c = self.criterion
        if self.left_out or c.margin is None or not isinstance(c.threshold, (int, float)) or c.threshold == 0:
            return None
        return c.margin / abs(c.threshold)

    @property
    def figures(self) -> str:
        if self.left_out:
            return "not judged at lab scale"
        c = self.criterion
        need = f"  need {c.comparator} {c.threshold_text()}" if c.comparator else ""
        return f"{c.measured_text()}{need}"

    @property
    def margin_text(self) -> str:
        c, fraction = self.criterion, self.fraction
        if fraction is not None:
            return f"{100 * fraction:+.1f} % of threshold"
        if c.margin is not None:
            return f"margin {c.margin_text()} (threshold 0)"
        if self.left_out:
            return "left out (reason in the table)"
        if c.outcome is Outcome.PASS:
            return "met" if c.comparator else "recorded"
        return {"fail": "not met", "not run": "no figure", "error": "could not judge"}[c.outcome.value]


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _grid_text(axes, rows: list[GridRow]) -> None:
    axes.set_axis_off()
    axes.set_xlim(0, 1)
    axes.set_ylim(-0.5, len(rows) + 0.5)          # the top row holds the column heads (under the title)
    for x, head in ((0.0, "gate"), (0.06, "criterion"), (0.60, "outcome"), (0.74, "measured, threshold")):
        axes.text(x, len(rows), head, fontsize=7, fontweight="bold", va="center")
    for y, row in zip(range(len(rows) - 1, -1, -1), rows):
        axes.text(0.0, y, row.gate, fontsize=7, va="center")
        axes.text(0.06, y, _short(row.criterion.name, 58), fontsize=7, va="center")
        axes.text(0.60, y, row.word.upper(), fontsize=6.5, va="center", color="white", fontweight="bold",
                  bbox={"boxstyle": "round,pad=0.25", "facecolor": COLOURS[row.word], "edgecolor": "none"})
        axes.text(0.74, y, _short(row.figures, 34), fontsize=6.5, va="center", family="monospace")


def _grid_bars(axes, rows: list[GridRow]) -> None:
    for y, row in zip(range(len(rows) - 1, -1, -1), rows):
        colour = COLOURS[row.word]
        if row.fraction is not None:
            shown = max(-1.0, min(1.0, row.fraction))
            axes.barh(y, shown, color=colour, height=0.6)
            anchor, align = (shown + 0.03, "left") if shown >= 0 else (0.03, "left")
            axes.text(anchor, y, row.margin_text + (" (bar clipped)" if shown != row.fraction else ""),
                      fontsize=6, va="center", ha=align)
        else:
            axes.text(0.0, y, row.margin_text, fontsize=6.5, va="center", ha="center", color=colour,
                      fontweight="bold")
    axes.axvline(0, color="black", linewidth=0.8)
    axes.set_xlim(-1.05, 1.6)
    axes.set_ylim(-0.5, len(rows) + 0.5)
    axes.text(0.0, len(rows), "margin", fontsize=7, fontweight="bold", va="center", ha="center")
    axes.set_yticks([])
    axes.set_xticks([-1, -0.5, 0, 0.5, 1], ["-100 %", "-50 %", "0", "+50 %", "+100 %"], fontsize=6.5)
    axes.set_xlabel("margin as a fraction of its own threshold (< 0: on the failing side)", fontsize=7)
    for side in ("top", "right", "left"):
        axes.spines[side].set_visible(False)


def gate_grid(rows: list[GridRow], title: str) -> bytes | None:
    """One line per criterion: gate, name, outcome, measured and threshold, margin bar (or yes/no)."""
    if not rows:
        return None
    figure, (text, bars) = plt.subplots(1, 2, figsize=(11, 0.26 * (len(rows) + 1) + 1.1),
                                        gridspec_kw={"width_ratios": [2.6, 1.4], "wspace": 0.02})
    _grid_text(text, rows)
    _grid_bars(bars, rows)
    text.set_title(title, fontsize=9, loc="left")
    return _png(figure)


def _scale(view: SoakView) -> tuple[float, str]:
    top = max((v for v in view.mean if v == v), default=0)
    return (1e9, "GB/s") if top >= 5e9 else (1e6, "MB/s")


def _mark_interruptions(axes, view: SoakView) -> list:
    kinds = list(dict.fromkeys(i.kind for i in view.interruptions))
    handles = []
    for n, kind in enumerate(kinds):
        colour = KIND_COLOURS[n % len(KIND_COLOURS)]
        marks = [i for i in view.interruptions if i.kind == kind]
        for i in marks:
            if i.end_h > i.start_h:
                axes.axvspan(i.start_h, i.end_h, color=colour, alpha=0.25, linewidth=0)
            axes.axvline(i.start_h, color=colour, linewidth=1.0)
            seconds = f" {i.seconds:.1f} s" if i.seconds is not None else ""
            axes.annotate(f"{kind}{seconds}", (i.start_h, 1.0), xycoords=("data", "axes fraction"), fontsize=6.5,
                          rotation=90, va="top", ha="right", color=colour)
        handles.append(Patch(color=colour, alpha=0.5, label=f"interruption: {kind} ({len(marks)})"))
    return handles


def soak(view: SoakView | None, title: str = "") -> bytes | None:
    """Bandwidth over the soak in hours: mean per bucket (line) over the bucket minimum (band)."""
    if view is None or len(view.edges_h) < 2:
        return None
    factor, unit = _scale(view)
    figure, axes = plt.subplots(figsize=(10, 3.8))
    mean = [v / factor for v in view.mean]
    low = [v / factor for v in view.minimum]
    axes.stairs(mean, view.edges_h, baseline=low, fill=True, color="#90caf9", alpha=0.7,
                label=f"minimum per {view.bucket_s:.3g} s bucket")
    axes.stairs(mean, view.edges_h, baseline=None, color="#1565c0", linewidth=1.1, label="mean per bucket")
    handles = _mark_interruptions(axes, view)
    if view.planned_h:
        axes.axvline(view.planned_h, color="black", linestyle="--", linewidth=0.8)
        handles.append(plt.Line2D([], [], color="black", linestyle="--", linewidth=0.8,
                                  label=f"planned end {format_number(view.planned_h, 'h')}"))
    axes.set_xlim(0, max(view.duration_h, view.planned_h or 0) * 1.02)
    top = max((v for v in mean if v == v), default=0)
    axes.set_ylim(bottom=0, top=top * 1.15 if top > 0 else 1)
    axes.set_xlabel("hours from the start of the load")
    axes.set_ylabel(f"bandwidth ({unit})")
    if view.duration_h < 2:
        top = axes.secondary_xaxis("top", functions=(lambda h: h * 60, lambda m: m / 60))
        top.set_xlabel("minutes", fontsize=7)
        top.tick_params(labelsize=7)
    axes.legend(handles=axes.get_legend_handles_labels()[0] + handles, fontsize=7, loc="lower left")
    axes.set_title(title or f"Soak {view.profile}: {format_number(view.duration_h, 'h')} with "
                   f"{len(view.interruptions)} interruption(s)", fontsize=9)
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
    axes.set_xlabel("concurrency")
    axes.set_ylabel("change vs baseline (%)")
    axes.set_title("G3: candidate vs baseline")
    axes.legend(fontsize=7)
    return _png(figure)
