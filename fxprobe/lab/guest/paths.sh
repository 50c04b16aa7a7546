#!/bin/sh
# Every NVMe-oF controller of this guest, one line each: SUBSYSNQN CONTROLLER STATE TRANSPORT ADDRESS
# (read by fxprobe.lab.vm.Lab.live_paths; run by path inside a lab guest). Shell builtins only: a fork costs
# ~0.1 s in a TCG guest and the lab polls this while it waits for paths.
for c in /sys/class/nvme-subsystem/*/nvme[0-9]*; do
  [ -e "$c/state" ] || continue
  { read -r nqn < "${c%/*}/subsysnqn" && read -r state < "$c/state" && read -r transport < "$c/transport"; } \
    2>/dev/null || continue        # the controller went away while it was read
  { read -r address < "$c/address"; } 2>/dev/null || address=
  echo "$nqn ${c##*/} $state $transport $address"
done
