"""Figures that cannot exceed a physical ceiling: a value above 100 % of it is a measurement artefact.

Line efficiency (goodput over the line rate), protocol efficiency (goodput over the payload ceiling at the
MTU) and read-back over the NIC ceiling are fractions of what the wire can carry. Above 1.0 (100 %) the
measurement is wrong - a clock, a counter or a line rate read from the wrong place - and the report shows
ARTEFACT, not PASS. A criterion in percent is capped at 100; one without a unit is a fraction capped at 1.
"""

from __future__ import annotations

from fxprobe.core.verdict import Criterion, format_number

CEILING_CRITERIA = ("line efficiency", "protocol efficiency", "multi-node read-back vs NIC ceiling")


def ceiling_of(c: Criterion) -> float | None:
    """The ceiling of a fraction-of-a-ceiling criterion (100 for %, 1 for a bare fraction), else None."""
    if c.name not in CEILING_CRITERIA:
        return None
    return 100.0 if c.unit == "%" else 1.0 if c.unit == "" else None


def artefact(c: Criterion) -> str:
    """Why ``c``'s figure is a measurement artefact, or "" when it is believable."""
    ceiling = ceiling_of(c)
    if ceiling is None or isinstance(c.measured, bool) or not isinstance(c.measured, (int, float)):
        return ""
    if c.measured <= ceiling:
        return ""
    return (f"{format_number(c.measured, c.unit)} is above the physical ceiling "
            f"{format_number(ceiling, c.unit)}: a measurement artefact, not a pass "
            "(check the line rate, the clock and the counters)")
