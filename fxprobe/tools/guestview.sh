#!/bin/sh
# Views of a lab guest's NVMe subsystems, drives and md arrays, read by fxprobe.tools.guestview (run by path inside
# a guest: the guests see this machine's files). Shell builtins only (read, globs) in the sampled views: a fork
# costs ~0.1-0.3 s in a TCG guest, and the fault run samples them every second while it measures.
#   sh guestview.sh VIEW...                      each view once: host, array, roles, timeouts
#   bash guestview.sh loop SECONDS INTERVAL VIEW the view every INTERVAL s for SECONDS, each after "T <epoch>" (under
#                                                bash: its clock and a timed read, no fork a sample; sh: date, sleep)
#   sh guestview.sh md-geometry MD               level, chunk and members (slot, data offset) of /dev/MD
# FXPROBE_SYSROOT (default /) is the root the kernel's files are read under (tests point it at a captured tree).
R=${FXPROBE_SYSROOT%/}

view_host() {   # subsys NAME NQN IOPOLICY / ns SUBSYS NS / path SUBSYS CTRL STATE TRANSPORT ADDRESS
  for s in "$R"/sys/class/nvme-subsystem/nvme-subsys*; do [ -d "$s" ] || continue
    read -r q < "$s/subsysnqn"; { read -r p < "$s/iopolicy"; } 2>/dev/null || p=-
    echo "subsys ${s##*/} $q $p"
    for n in "$s"/nvme*n*; do [ -e "$n" ] && echo "ns ${s##*/} ${n##*/}"; done
    for c in "$s"/nvme*; do [ -e "$c/state" ] || continue
      read -r st < "$c/state"; read -r tr < "$c/transport"; { read -r ad < "$c/address"; } 2>/dev/null || ad=
      echo "path ${s##*/} ${c##*/} $st $tr $ad"; done
  done
}

view_array() {  # /proc/mdstat, "--fxprobe--", then ctrl NAME SERIAL NAMESPACE per NVMe controller
  while IFS= read -r line; do echo "$line"; done < "$R/proc/mdstat"; echo "--fxprobe--"
  for c in "$R"/sys/class/nvme/nvme*; do [ -e "$c/serial" ] || continue
    read -r sn < "$c/serial"; ns=
    for n in "$c"/nvme*n*; do [ -e "$n" ] && { ns=${n##*/}; break; }; done
    echo "ctrl ${c##*/} $sn $ns"; done
}

view_timeouts() { # tmo CTRL TRANSPORT SUBSYSNQN STATE KATO CTRL_LOSS_TMO RECONNECT_DELAY FAST_IO_FAIL_TMO ADDRESS per
                  # fabrics controller, iopolicy NQN POLICY per subsystem ("-": no such file)
  for c in "$R"/sys/class/nvme/nvme*; do [ -e "$c/transport" ] || continue
    read -r tr < "$c/transport"; [ "$tr" = pcie ] && continue
    { read -r q < "$c/subsysnqn"; } 2>/dev/null || q=-; { read -r st < "$c/state"; } 2>/dev/null || st=-
    line="tmo ${c##*/} $tr $q $st"
    for k in kato ctrl_loss_tmo reconnect_delay fast_io_fail_tmo; do
      { read -r v < "$c/$k"; } 2>/dev/null || v=-; line="$line $v"; done
    { read -r ad < "$c/address"; } 2>/dev/null || ad=-
    echo "$line $ad"; done
  for s in "$R"/sys/class/nvme-subsystem/nvme-subsys*; do [ -d "$s" ] || continue
    read -r q < "$s/subsysnqn"; { read -r p < "$s/iopolicy"; } 2>/dev/null || p=-; echo "iopolicy $q $p"; done
}

view_roles() {  # mdinfo MD LAYOUT / role MD MEMBER SLOT: md roles and raid10 layouts (not sampled: it reads more)
  for m in "$R"/sys/block/md*/md; do [ -d "$m" ] || continue; d=${m%/md}; d=${d##*/}
    { read -r lay < "$m/layout"; } 2>/dev/null || lay=-
    echo "mdinfo $d $lay"
    for r in "$m"/dev-*; do [ -e "$r/slot" ] || continue; read -r sl < "$r/slot"; echo "role $d ${r##*/dev-} $sl"; done
  done
}

md_geometry() { # level LEVEL / chunk BYTES / member DEVICE SLOT OFFSET
  d=$R/sys/block/$1/md; read -r level < "$d/level"; read -r chunk < "$d/chunk_size"
  echo "level $level"; echo "chunk $chunk"
  for m in "$d"/dev-*; do [ -e "$m/slot" ] || continue
    read -r slot < "$m/slot"; read -r offset < "$m/offset"; echo "member ${m##*/dev-} $slot $offset"; done
}

case "$1" in
  loop) if [ -n "${EPOCHREALTIME:-}" ]; then    # bash: its clock, and a wait on a fifo nobody writes - no fork a sample
          LC_ALL=C; f=$(mktemp -u); mkfifo -m 600 "$f"; exec 3<>"$f"; rm -f "$f"
          end=$(( ${EPOCHREALTIME%.*} + $2 ))
          while [ "${EPOCHREALTIME%.*}" -lt "$end" ]; do echo "T $EPOCHREALTIME"; "view_$4"; read -r -t "$3" -u 3 _; done
        else end=$(( $(date +%s) + $2 ))
          while [ "$(date +%s)" -lt "$end" ]; do echo "T $(date +%s.%N)"; "view_$4"; sleep "$3"; done
        fi ;;
  md-geometry) md_geometry "$2" ;;
  *) for view in "$@"; do "view_$view"; done ;;
esac
exit 0
