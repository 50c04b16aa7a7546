"""What fxprobe checks and does on one host: inventory, NVMe-oF paths, self-test, preflight, doctor, safety,
telemetry. Processes and kernel files only through fxprobe.core and fxprobe.tools."""
