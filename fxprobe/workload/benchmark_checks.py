"""A ``vllm bench serve --save-result`` file checked against itself, before G2 or G3 read a figure from it.

vLLM writes its headline figures from the counts and per-request samples the same file holds
(``vllm/benchmarks/serve.py``, ``calculate_metrics``):

- ``request_throughput = completed / duration``, ``output_throughput = total_output_tokens / duration``,
  ``total_token_throughput = (total_input_tokens + total_output_tokens) / duration``;
- with ``--save-detailed``, one entry per request in ``ttfts`` (s), ``output_lens`` and ``input_lens``:
  ``median_ttft_ms = median(ttfts) x 1000``, ``p{N}_ttft_ms = percentile(ttfts, N) x 1000`` (numpy, linear),
  ``mean_ttft_ms = mean(ttfts) x 1000``, ``total_output_tokens = sum(output_lens)``,
  ``total_input_tokens = sum(input_lens)``, and as many ``ttfts`` as requests completed.

A figure that disagrees with what its own file gives by more than ``REL_TOL`` (relative) was not written that way
by vLLM: it was edited, rounded or pasted from another run, and the file is refused (naming the field, both values
and the formula). Whatever the file lets fxprobe recompute is checked, and the result says which relations those
were, or that the file holds nothing to check its figures against. A consistent forgery of every field passes
these checks: they catch the edit of one figure, not a rewritten file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy

from fxprobe.tools.vllm_bench import as_number, number

MARK = "against the file's own counts"     # in the line saying what was checked (gates and the report print it)
REL_TOL = 1e-6          # vLLM writes full floats: a recomputed figure agrees to far better than this
TTFT_PERCENTILES = (50, 90, 99)
RATE, TTFT, COUNT, SAME = "rate", "ttft", "count", "same"   # SAME: two recorded figures, not against the counts


@dataclass(frozen=True)
class Recomputed:
    """One figure of the file beside the value its own parts give."""

    field: str
    recorded: float
    recomputed: float
    formula: str
    kind: str                # RATE (counts / duration), TTFT (from ttfts), COUNT (equal, no tolerance), SAME

    @property
    def count(self) -> bool:
        return self.kind == COUNT

    @property
    def agrees(self) -> bool:
        if self.count:
            return self.recorded == self.recomputed
        return abs(self.recorded - self.recomputed) <= REL_TOL * abs(self.recomputed)

    def disagreement(self) -> str:
        rule = "equal" if self.count else f"relative tolerance {REL_TOL:g}"
        return (f"field {self.field!r} is {self.recorded:.10g}, but the file's own {self.formula} gives "
                f"{self.recomputed:.10g} ({rule})")


def _samples(data: dict, key: str) -> list[float] | None:
    values = data.get(key)
    if not isinstance(values, list) or not values:
        return None
    numbers = [as_number(v) for v in values]
    return None if any(n is None for n in numbers) else numbers


def _rates(data: dict) -> list[Recomputed]:
    duration = number(data, "duration")
    if duration is None or duration <= 0:
        return []
    completed, out_tokens = number(data, "completed"), number(data, "total_output_tokens")
    in_tokens = number(data, "total_input_tokens")
    found = []
    for field, parts, formula in (
            ("request_throughput", (completed,), "completed / duration"),
            ("output_throughput", (out_tokens,), "total_output_tokens / duration"),
            ("total_token_throughput", (in_tokens, out_tokens), "(total_input_tokens + total_output_tokens) / duration")):
        recorded = number(data, field)
        if recorded is not None and all(p is not None for p in parts):
            found.append(Recomputed(field, recorded, sum(parts) / duration, formula, RATE))
    return found


def _per_request(data: dict) -> list[Recomputed]:
    found = []
    ttfts = _samples(data, "ttfts")
    if ttfts is not None:
        values = numpy.asarray(ttfts)
        n = f"{len(ttfts)} ttfts"
        figures = [("median_ttft_ms", float(numpy.median(values)) * 1000, f"median of its {n} x 1000"),
                   ("mean_ttft_ms", float(values.mean()) * 1000, f"mean of its {n} x 1000")]
        figures += [(f"p{p}_ttft_ms", float(numpy.percentile(values, p)) * 1000, f"percentile {p} of its {n} x 1000")
                    for p in TTFT_PERCENTILES]
        found += [Recomputed(field, recorded, value, formula, TTFT) for field, value, formula in figures
                  if (recorded := number(data, field)) is not None]
        completed = number(data, "completed")
        if completed is not None:
            found.append(Recomputed("completed", completed, float(len(ttfts)), "number of ttfts", COUNT))
    for field, key in (("total_output_tokens", "output_lens"), ("total_input_tokens", "input_lens")):
        lens, recorded = _samples(data, key), number(data, field)
        if lens is not None and recorded is not None:
            found.append(Recomputed(field, recorded, float(sum(lens)), f"sum of {key}", COUNT))
    return found


def _percentile_order(data: dict) -> list[str]:
    """Percentiles never fall as the rank rises: p50 (or the median) <= p90 <= p99, samples or not."""
    p50 = "p50_ttft_ms" if number(data, "p50_ttft_ms") is not None else "median_ttft_ms"
    ranked = [(key, value) for key in (p50, "p90_ttft_ms", "p99_ttft_ms") if (value := number(data, key)) is not None]
    return [f"field {high!r} ({hv:.10g}) is below {low!r} ({lv:.10g}): a higher percentile cannot be lower"
            for (low, lv), (high, hv) in zip(ranked, ranked[1:]) if hv < lv]


def _median_is_p50(data: dict) -> list[Recomputed]:
    median, p50 = number(data, "median_ttft_ms"), number(data, "p50_ttft_ms")
    return [] if median is None or p50 is None else \
        [Recomputed("median_ttft_ms", median, p50, "p50_ttft_ms (the median is percentile 50)", SAME)]


def recompute(data: dict[str, Any]) -> list[Recomputed]:
    """Every figure of a vllm bench serve result that its own counts and samples let fxprobe recompute."""
    return _rates(data) + _per_request(data) + _median_is_p50(data)


def self_check(data: dict[str, Any]) -> tuple[list[str], str]:
    """(problems, one line saying what was checked and what could not be). Problems: each figure that disagrees
    with its own file, and percentiles out of order; empty when the file agrees with itself."""
    figures = recompute(data)
    problems = [f.disagreement() for f in figures if not f.agrees] + _percentile_order(data)
    return problems, checked_line(data, figures)


READ_FIGURES = ("output_throughput", "request_throughput", "median_ttft_ms", "p50_ttft_ms", "p90_ttft_ms",
                "p99_ttft_ms", "mean_ttft_ms")      # what fxprobe's gates may read from the file


def checked_line(data: dict[str, Any], figures: Sequence[Recomputed]) -> str:
    against_counts = [f for f in figures if f.kind != SAME]
    checked = {f.field for f in against_counts}
    unchecked = [key for key in READ_FIGURES if number(data, key) is not None and key not in checked]
    why = ("vllm bench serve --save-result writes duration and token counts, --save-detailed per-request ttfts")
    if not against_counts:
        return f"not checkable {MARK}: {', '.join(unchecked) or 'no figure'} ({why})"
    rates = [f.field for f in against_counts if f.kind == RATE]
    ttft = [f.field for f in against_counts if f.kind == TTFT]
    counts = [f"{f.field} ({f.formula})" for f in against_counts if f.count]
    parts = ([f"{', '.join(rates)} = counts / duration"] if rates else []) + \
        ([f"{', '.join(ttft)} from its per-request ttfts"] if ttft else []) + counts
    line = f"checked {MARK}: {'; '.join(parts)} (relative tolerance {REL_TOL:g}, counts equal)"
    return line + (f"; not checkable: {', '.join(unchecked)} ({why})" if unchecked else "")
