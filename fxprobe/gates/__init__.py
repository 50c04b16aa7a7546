"""Acceptance gates G1-G4: thresholds (config), the declarative engine, and the gate catalog.

The names below load their module when first asked for (PEP 562): a command that only reads the thresholds
(``soak`` warns at its start when ``--stall`` is longer than G4 accepts) does not load the gate catalog and the
log analysis its G3 reads with (polars), which a lab guest imports under emulation."""

from __future__ import annotations

import importlib

_MODULE_OF = {"GATES": "catalog", "evaluate_all": "catalog", "GateConfig": "config", "load_config": "config",
              "Check": "engine", "Evidence": "engine", "Gate": "engine", "Requirement": "engine",
              "verdict_lines": "engine"}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULE_OF[name]}"), name)
