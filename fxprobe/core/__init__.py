"""Core services every other room uses: errors and exit codes, the run directory and its manifest, the one
subprocess runner, hosts and node names, verdicts, TOML reading, sysfs/procfs readers, the clock."""
