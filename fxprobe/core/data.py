"""``AsDict``: the one ``to_dict`` of a result dataclass whose fields are already plain data."""

from __future__ import annotations

from dataclasses import asdict


class AsDict:
    """Mixin for a dataclass: ``to_dict()`` is its fields as plain data (``dataclasses.asdict``, recursive)."""

    def to_dict(self) -> dict:
        return asdict(self)
