"""The fault timeline as a PNG: load (IOPS, p99 per window), the fault window, restore, path states."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from fxprobe.tools.fio import FioHistLog, percentile_from_bins  # noqa: E402


def p99_series(hist: FioHistLog | None) -> pd.Series:
    if hist is None or len(hist.time_ms) == 0:
        return pd.Series(dtype=float)
    values = hist.bin_values_ns()
    out = {}
    for stamp, row in zip(hist.time_ms, hist.counts):
        bins = {v: int(c) for v, c in zip(values, row) if c}
        if bins:
            out[int(stamp)] = percentile_from_bins(bins, 99.0) / 1e6
    return pd.Series(out, dtype=float)


def _errors_axis(ax_iops, errors: list[tuple[int, int]], rel) -> None:
    """(epoch ms, cumulative errored I/O) from fio's 1 s status reports, on a right-hand axis (none: nothing)."""
    if errors and errors[-1][1] > 0:
        ax_err = ax_iops.twinx()
        ax_err.step([rel(t) for t, _ in errors], [n for _, n in errors], where="post", color="tab:red", lw=1,
                    ls="--")
        ax_err.set_ylabel("errored I/O (cumulative)", color="tab:red")
        ax_err.set_ylim(bottom=0)
        ax_iops.plot([], [], color="tab:red", lw=1, ls="--", label="errored I/O, cumulative (right axis)")


def _bands(ax_iops, ax_lat, bands, rel) -> None:
    """md's degraded / rebuilding intervals as labelled bands in the lower part of the load axes."""
    for label, start, end, color in bands:
        for ax in (ax_iops, ax_lat):
            ax.axvspan(rel(start), rel(end), ymin=0.0, ymax=0.08, color=color, alpha=0.6,
                       label=label if ax is ax_iops else None)


def plot_timeline(path: Path, *, title: str, iops: pd.Series, hist: FioHistLog | None, start_ms: int,
                  inject_ms: int, restore_ms: int, flaps: list[tuple[int, bool]] = (),
                  samples: list[dict] = (), events: list[dict] = (), stall: tuple[float, int | None] = (0, None),
                  errors: list[tuple[int, int]] = (), bands: list[tuple[str, int, int, str]] = ()) -> Path:
    """Write the PNG; x axis in seconds from the load start."""
    rel = lambda ms: (ms - start_ms) / 1000.0
    fig, axes = plt.subplots(3, 1, figsize=(11, 7.5), sharex=True,
                             gridspec_kw={"height_ratios": [3, 2, 1.2]})
    ax_iops, ax_lat, ax_paths = axes
    if len(iops):
        ax_iops.step([rel(t) for t in iops.index], iops.values, where="pre", color="tab:blue", label="IOPS (per window)")
    p99 = p99_series(hist)
    if len(p99):
        ax_lat.step([rel(t) for t in p99.index], p99.values, where="pre", color="tab:purple", label="p99 latency")
        if (p99 > 0).any():
            ax_lat.set_yscale("log")
    for ax in axes:
        ax.axvspan(rel(inject_ms), rel(restore_ms), color="tab:red", alpha=0.12)
        ax.axvline(rel(inject_ms), color="tab:red", lw=1.5)
        ax.axvline(rel(restore_ms), color="tab:green", lw=1.5)
        for at, up in flaps:
            ax.axvline(rel(at), color="tab:green" if up else "tab:red", lw=0.6, ls=":")
    _bands(ax_iops, ax_lat, bands, rel)
    if stall[0] and stall[1] is not None:
        ax_iops.axvspan(rel(stall[1]), rel(stall[1]) + stall[0], color="black", alpha=0.15,
                        label=f"longest stall {stall[0]:g} s")
    ax_iops.plot([], [], color="tab:red", label="fault injected")
    ax_iops.plot([], [], color="tab:green", label="restored")
    ax_iops.fill_between([], [], color="tab:red", alpha=0.12, label="fault window (injected to restored)")
    if flaps:
        ax_iops.plot([], [], color="tab:red", lw=0.6, ls=":", label="link flap: down")
        ax_iops.plot([], [], color="tab:green", lw=0.6, ls=":", label="link flap: up")
    ax_iops.set_ylabel("IOPS (successful I/O)")
    ax_iops.set_ylim(bottom=0)
    _errors_axis(ax_iops, errors, rel)
    ax_iops.legend(loc="upper right", fontsize=8)
    ax_iops.set_title(title, fontsize=10)
    ax_lat.set_ylabel("p99 (ms)")
    if samples:
        xs = [rel(s["t"] * 1000) for s in samples]
        live = [sum(1 for v in s["paths"].values() if v == "live") for s in samples]
        ax_paths.step(xs, live, where="post", color="tab:orange", label="live paths")
        degraded = [sum(1 for v in s["md"].values() if "_" in v) for s in samples]
        ax_paths.step(xs, degraded, where="post", color="tab:gray", label="degraded md arrays")
    shown = [e for e in events if e.get("source") != "listener"]
    for event in shown:
        ax_paths.axvline(rel(event["t"] * 1000), color="tab:brown", lw=0.5, alpha=0.5)
    if shown:
        ax_paths.plot([], [], color="tab:brown", lw=0.5, alpha=0.5, label="kernel / udev event")
    if samples or shown:
        ax_paths.legend(loc="upper right", fontsize=8)
    ax_paths.set_ylabel("state")
    ax_paths.set_xlabel("seconds from load start")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return Path(path)
