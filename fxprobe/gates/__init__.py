"""Acceptance gates G1-G4: thresholds (config), the declarative engine, and the gate catalog."""

from fxprobe.gates.catalog import GATES, evaluate_all
from fxprobe.gates.config import GateConfig, load_config
from fxprobe.gates.engine import Check, Evidence, Gate, Requirement, verdict_lines

__all__ = ["GATES", "evaluate_all", "Check", "Evidence", "Gate", "GateConfig", "Requirement", "load_config", "verdict_lines"]
