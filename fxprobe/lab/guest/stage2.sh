#!/bin/bash
# fxprobe lab guest, stage 2 (PID 1 after switch_root, running from the host's root).
# Reads /fxlab/guest.env (written by `fxprobe lab up`), brings up the guest, starts sshd,
# then reaps children forever.
exec </dev/null >/dev/console 2>&1
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
say() { local up rest; read -r up rest < /proc/uptime; echo "fxlab[$FXLAB_NAME] ${up}s: $*"; }
mkdir -p /run /tmp /dev/pts /dev/shm
mount -t tmpfs -o mode=0755 tmpfs /run
# /tmp stays the host's (read through the overlay, writes land in the guest's tmpfs upper layer): a checkout
# under /tmp, where fxprobe's editable install points, must stay importable in the guest.
chmod 1777 /tmp
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
. /fxlab/guest.env
say "stage 2 on $(uname -r)"
hostname "$FXLAB_NAME"
echo "$FXLAB_NAME" > /etc/hostname
modprobe configfs && mount -t configfs configfs /sys/kernel/config
# udev first, so devices made by the modules below are handled as they appear; coldplug only
# the subsystems fxprobe reads through udev (block, nvme, net, infiniband), not the whole tree. It does
# not rename NICs: they are named below by MAC (fxlab's .link keeps whatever name an interface has).
mkdir -p /etc/systemd/network
printf '[Match]\nOriginalName=*\n\n[Link]\nNamePolicy=keep\nMACAddressPolicy=none\n' > /etc/systemd/network/10-fxlab.link
/lib/systemd/systemd-udevd --daemon
udevadm trigger --action=add --subsystem-match=block --subsystem-match=nvme --subsystem-match=net \
  --subsystem-match=infiniband --subsystem-match=infiniband_verbs --subsystem-match=misc
# modules: one `modprobe -a` per line (the first line is what the network needs); options from the share
cp /fxlab/modprobe.conf /etc/modprobe.d/fxlab.conf
n=0
while read -r line; do
  n=$((n + 1))
  [ -n "$line" ] && { modprobe -a $line || say "modprobe -a $line failed"; }
  say "modules line $n loaded"
done < /fxlab/modules
[ "${FXLAB_FORWARD:-0}" = 1 ] && echo 1 > /proc/sys/net/ipv4/ip_forward
# NICs are named by MAC: "mac name address/prefix" per line in /fxlab/nics. Shell builtins find them and one
# `ip -batch` and one `rdma -b` (batch) set them all up: an array guest of 8 hosts x 2 links has 17 NICs, and each
# fork under TCG costs 0.1-0.5 s. udev keeps kernel names (the .link file above), so no rename races this;
# should one fail anyway, udev is let settle and the batch is run again past what is already done.
ip link set lo up
nics() {
  local dev mac name addr old
  declare -A by_mac
  for dev in /sys/class/net/*; do
    read -r mac < "$dev/address" && by_mac[$mac]=${dev##*/}
  done
  : > /run/fxlab-ip.batch
  : > /run/fxlab-rdma.batch
  while read -r mac name addr; do
    old=${by_mac[$mac]:-}
    [ -n "$mac" ] && [ -n "$old" ] || continue
    [ "$old" = "$name" ] || echo "link set dev $old name $name" >> /run/fxlab-ip.batch
    [ "$name" = mgmt ] || echo "link set dev $name mtu $FXLAB_MTU" >> /run/fxlab-ip.batch
    echo "address replace $addr dev $name" >> /run/fxlab-ip.batch
    echo "link set dev $name up" >> /run/fxlab-ip.batch
    [ "$name" != mgmt ] && [ -n "$FXLAB_RXE" ] && [ ! -e "/sys/class/infiniband/rxe_$name" ] && \
      echo "link add rxe_$name type rxe netdev $name" >> /run/fxlab-rdma.batch
  done < /fxlab/nics
  ip "$@" -batch /run/fxlab-ip.batch && { [ ! -s /run/fxlab-rdma.batch ] || rdma -b /run/fxlab-rdma.batch; }
}
nics || { say "NIC setup failed once; again after udev settles"; udevadm settle --timeout=60; nics -force; } \
  || say "NIC setup failed"
say "network set"
ip route add default via 10.0.2.2 dev mgmt 2>/dev/null
while read -r dest via; do
  [ -n "$dest" ] && { ip route add "$dest" via "$via" || say "route $dest via $via failed"; }
done < /fxlab/routes
# a plain login shell: the host's root .bashrc (pyenv init...) is slow under TCG
sed -i 's#^\(root:.*:\)[^:]*$#\1/bin/sh#' /etc/passwd
cp /fxlab/hosts /etc/hosts
# no name server: the lab's names are in /etc/hosts. The host's resolv.conf names servers a guest cannot reach,
# and every lookup that falls through to them (getent's IPv6 first try) waited 10 s for their timeouts
rm -f /etc/resolv.conf && echo '# fxprobe lab guest: names come from /etc/hosts' > /etc/resolv.conf
mkdir -p /etc/nvme
echo "$FXLAB_HOSTNQN" > /etc/nvme/hostnqn
echo "$FXLAB_HOSTID" > /etc/nvme/hostid
# sshd with the lab's own keys, copied off the share so the modes are right.
mkdir -p /etc/fxlab /run/sshd
chmod 0700 /etc/fxlab
cp /fxlab/ssh_host_ed25519_key /fxlab/authorized_keys /fxlab/sshd_config /etc/fxlab/
chmod 0600 /etc/fxlab/*
say "modules, network and names set"
/usr/sbin/sshd -f /etc/fxlab/sshd_config -E /fxlab/sshd.log || say "sshd failed to start"
udevadm settle --timeout=120
say "udev settled"
touch /run/fxlab-ready
# and on the guest's share, where `lab up` sees it without asking the guest over ssh
touch /fxlab/booted
say "ready"
while :; do
  sleep 3600 &
  wait $!
done
