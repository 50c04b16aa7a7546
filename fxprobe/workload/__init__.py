"""Workloads: KV-cache profiles and model geometry, fio job files, runs and sweeps, I/O patterns,
inference benchmark results."""
