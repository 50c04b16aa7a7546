"""``vllm bench serve``: the summary it prints as it ends, parsed (pure), beside the figures of the file it saved.

vLLM prints each figure as ``"{:<40} {:<10.2f}".format(label, value)`` (counts with ``{:<10}``) between
``==== Serving Benchmark Result ====`` and a closing rule; the same run's ``--save-result`` file holds the same
figures unrounded. ``summary_differences`` formats the file's figure as vLLM prints it and compares the text, so a
file edited after the run (or saved by another run) disagrees with what the command printed.
"""

from __future__ import annotations

import math
import re


HEADER = "Serving Benchmark Result"
LABELS = {                                   # printed label -> the saved file's key
    "Successful requests": "completed",
    "Failed requests": "failed",
    "Benchmark duration (s)": "duration",
    "Total input tokens": "total_input_tokens",
    "Total generated tokens": "total_output_tokens",
    "Request throughput (req/s)": "request_throughput",
    "Output token throughput (tok/s)": "output_throughput",
    "Total token throughput (tok/s)": "total_token_throughput",
    "Mean TTFT (ms)": "mean_ttft_ms",
    "Median TTFT (ms)": "median_ttft_ms",
}
COUNTS = {"completed", "failed", "total_input_tokens", "total_output_tokens"}
_LINE = re.compile(r"^(?P<label>[A-Za-z][A-Za-z0-9 ()/.\-]*?):\s+(?P<value>-?[0-9]+(?:\.[0-9]+)?)\s*$")
_PERCENTILE = re.compile(r"^P(?P<p>[0-9]+(?:\.[0-9]+)?) TTFT \(ms\)$")


def parse_summary(stdout: str) -> dict[str, str]:
    """The saved file's key -> the text vLLM printed for it, from the last summary in ``stdout`` (empty: none)."""
    at = stdout.rfind(HEADER)
    if at < 0:
        return {}
    figures: dict[str, str] = {}
    for line in stdout[at:].splitlines()[1:]:
        match = _LINE.match(line.strip())
        if not match:
            continue
        label, value = match["label"], match["value"]
        key = LABELS.get(label)
        if key is None and (p := _PERCENTILE.match(label)):
            key = f"p{p['p']}_ttft_ms"
        if key is not None:
            figures[key] = value
    return figures


def as_number(value) -> float | None:
    """A finite number, written as one or as a string (fxprobe's parser reads both); else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def number(saved: dict, key: str) -> float | None:
    return as_number(saved.get(key))


def printed_as_vllm(key: str, value: float) -> str:
    return str(int(value)) if key in COUNTS else f"{value:.2f}"


def summary_differences(printed: dict[str, str], saved: dict) -> tuple[list[str], list[str]]:
    """(disagreements, keys that agree): each printed figure against the saved file's, formatted as vLLM prints
    it; a figure the file does not hold is a disagreement too."""
    wrong, agree = [], []
    for key, text in printed.items():
        value = number(saved, key)
        if value is None:
            wrong.append(f"{key}: printed {text}, not in the file")
        elif printed_as_vllm(key, value) != text:
            wrong.append(f"{key}: printed {text}, the file holds {value:.10g} ({printed_as_vllm(key, value)} as printed)")
        else:
            agree.append(key)
    return wrong, agree
