"""Adapters for the external tools fxprobe wraps, one module per tool.

Each module has pure ``parse_*`` functions over captured text (every failure is
``ParseError(source, field, problem)``), thin ``run_*`` wrappers that take a
``Runner`` and a host, and ``probe_*`` functions that return a reason string
(or None) instead of raising.

- ``fio``       fio JSON / json+ / client-server, latency bins, logs
- ``perftest``  ib_read_bw / ib_write_bw text report
- ``iperf3``    iperf3 --json
- ``nvme``      nvme-cli JSON (1.x and 2.x shapes)
- ``fields``    checked access to JSON fields shared by the parsers
"""
