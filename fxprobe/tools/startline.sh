#!/bin/sh
# sh startline.sh ARGV...: print "<epoch> <pid>" on the first line, then run ARGV as this very process (exec keeps
# the pid). How a fault run learns the pid of the load it starts, here or in a lab guest (which sees this file), to
# journal it before the fault and stop that load after a crash (tools.procs).
echo "$(date +%s.%N) $$"
exec "$@"
