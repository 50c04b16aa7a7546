"""Calculators a buyer can rerun with their own numbers: model-switch utilization and storage cost share.

Model switching
---------------
A GPU that switches models ``N`` times per hour is idle while each new model loads. With
``t`` the time of one switch in seconds (load time = model size / read bandwidth, plus any
fixed overhead such as process start-up and warm-up)::

    utilization U = max(0, 1 - N * t / 3600)            (fraction of the hour spent computing)
    t = (1 - U) * 3600 / N                             (the switch time a stated U implies)
    t = model_GB / read_GB_per_s + overhead_s

Worked example (R1: "at 20 switches/hour, utilization 46.7 % -> 62.8 %"): the formula
reproduces 46.7 % with t = 95.9 s and 62.8 % with t = 67.0 s. 67.0 s is exactly a 65.6 GB
model read at 0.98 GB/s (R1's bandwidth *before* the patch); read at 5.23 GB/s (after) the
same model loads in 12.5 s, giving 93.0 %.

Storage cost share
------------------
``arrays = ceil(nodes / nodes_per_array)``;
``storage = arrays * array_price + nodes * per_node_storage_price`` (NICs, cables, switch ports);
``gpu = nodes * node_price``; ``share % = storage / gpu * 100``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fxprobe.core.data import AsDict
from fxprobe.core.errors import BadInput

SECONDS_PER_HOUR = 3600.0


def _positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    if value is None or not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise BadInput(f"{name} must be a {'non-negative' if allow_zero else 'positive'} number, got {value!r}")


def utilization(switches_per_hour: float, switch_time_s: float) -> float:
    """Fraction of an hour spent computing: max(0, 1 - N * t / 3600)."""
    _positive("switches per hour", switches_per_hour, allow_zero=True)
    _positive("switch time (s)", switch_time_s, allow_zero=True)
    return max(0.0, 1.0 - switches_per_hour * switch_time_s / SECONDS_PER_HOUR)


def switch_time_for(utilization_fraction: float, switches_per_hour: float) -> float:
    """The switch time a stated utilization implies: (1 - U) * 3600 / N."""
    if not 0 <= utilization_fraction <= 1:
        raise BadInput(f"utilization must be within 0...100 %, got {utilization_fraction * 100:g} %")
    _positive("switches per hour", switches_per_hour)
    return (1.0 - utilization_fraction) * SECONDS_PER_HOUR / switches_per_hour


def load_time(model_gb: float, read_gb_per_s: float, overhead_s: float = 0.0) -> float:
    """Seconds to load a model: size / bandwidth + overhead (decimal GB and GB/s)."""
    _positive("model size (GB)", model_gb)
    _positive("read bandwidth (GB/s)", read_gb_per_s)
    _positive("overhead (s)", overhead_s, allow_zero=True)
    return model_gb / read_gb_per_s + overhead_s


@dataclass(frozen=True)
class SwitchScenario(AsDict):
    label: str
    switches_per_hour: float
    switch_time_s: float
    utilization_pct: float


def scenario(label: str, switches_per_hour: float, switch_time_s: float) -> SwitchScenario:
    return SwitchScenario(label, switches_per_hour, switch_time_s,
                          utilization(switches_per_hour, switch_time_s) * 100.0)


@dataclass(frozen=True)
class CostShare(AsDict):
    nodes: int
    nodes_per_array: int
    arrays: int
    storage_cost: float
    gpu_cost: float
    share_pct: float


def storage_cost_share(nodes: int, node_price: float, array_price: float, nodes_per_array: int = 8,
                       per_node_storage_price: float = 0.0) -> CostShare:
    """Storage spend as a percentage of the GPU budget (formula in the module docstring)."""
    if nodes < 1 or nodes_per_array < 1:
        raise BadInput(f"nodes ({nodes}) and nodes per array ({nodes_per_array}) must be at least 1")
    _positive("node price", node_price)
    _positive("array price", array_price, allow_zero=True)
    _positive("per-node storage price", per_node_storage_price, allow_zero=True)
    arrays = math.ceil(nodes / nodes_per_array)
    storage = arrays * array_price + nodes * per_node_storage_price
    gpu = nodes * node_price
    return CostShare(nodes, nodes_per_array, arrays, storage, gpu, storage / gpu * 100.0)
