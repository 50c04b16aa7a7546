#!/bin/sh
# Every NVMe-oF controller of this guest, one line each: SUBSYSNQN CONTROLLER STATE TRANSPORT ADDRESS
# (read by fxprobe.lab.vm.Lab.live_paths; run by path inside a lab guest).
for c in /sys/class/nvme-subsystem/*/nvme[0-9]*; do
  [ -e "$c/state" ] || continue
  echo "$(cat "${c%/*}/subsysnqn") ${c##*/} $(cat "$c/state") $(cat "$c/transport") $(cat "$c/address")"
done
