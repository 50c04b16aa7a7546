#!/bin/sh
# sh -s -- ADMINDIR PROGRAM PACKAGE < origin.sh: the facts tools.dpkg judges where PROGRAM comes from on the node
# that runs it. Fed on standard input to the node's sh (a node reached over SSH need not have fxprobe), it prints
# "path", "real" (symbolic links resolved), "md5", "sha256" and "version" (of PACKAGE) lines, then a line
# "md5sums" and PACKAGE's md5sums as dpkg keeps them; "missing ..." alone when PROGRAM is not on PATH.
admindir=$1 program=$2 package=$3
path=$(command -v "$program") || { echo "missing $program is not on PATH"; exit 0; }
real=$(readlink -f "$path")
echo "path $path"
echo "real $real"
set -- $(md5sum "$real") && echo "md5 $1"
set -- $(sha256sum "$real") && echo "sha256 $1"
echo "version $(dpkg-query --admindir="$admindir" --show --showformat '${Version}' "$package" 2>/dev/null)"
echo "md5sums"
[ -n "$package" ] && cat "$admindir/info/$package.md5sums" 2>/dev/null
exit 0
