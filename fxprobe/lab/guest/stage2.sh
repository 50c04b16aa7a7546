#!/bin/bash
# fxprobe lab guest, stage 2 (PID 1 after switch_root, running from the host's root).
# Reads /fxlab/guest.env (written by `fxprobe lab up`), brings up the guest, starts sshd,
# then reaps children forever.
exec </dev/null >/dev/console 2>&1
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
say() { echo "fxlab[$FXLAB_NAME] $(cut -d' ' -f1 /proc/uptime)s: $*"; }
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
# the subsystems fxprobe reads through udev (block, nvme, net, infiniband), not the whole tree.
/lib/systemd/systemd-udevd --daemon
udevadm trigger --action=add --subsystem-match=block --subsystem-match=nvme --subsystem-match=net \
  --subsystem-match=infiniband --subsystem-match=infiniband_verbs --subsystem-match=misc
# modules: one `modprobe -a` per line (the first line is what the network needs); options from the share
cp /fxlab/modprobe.conf /etc/modprobe.d/fxlab.conf
while read -r line; do
  [ -n "$line" ] && { modprobe -a $line || say "modprobe -a $line failed"; }
done < /fxlab/modules
[ "${FXLAB_FORWARD:-0}" = 1 ] && echo 1 > /proc/sys/net/ipv4/ip_forward
# NICs are named by MAC: "mac name address/prefix" per line in /fxlab/nics.
ip link set lo up
while read -r mac name addr; do
  [ -n "$mac" ] || continue
  for dev in /sys/class/net/*; do
    if [ "$(cat "$dev/address")" = "$mac" ]; then
      old=$(basename "$dev")
      [ "$old" = "$name" ] || ip link set "$old" name "$name"
      [ "$name" = mgmt ] || ip link set "$name" mtu "$FXLAB_MTU"
      ip addr add "$addr" dev "$name"
      ip link set "$name" up
      if [ "$name" != mgmt ] && [ -n "$FXLAB_RXE" ]; then
        rdma link add "rxe_$name" type rxe netdev "$name" || say "rdma link add rxe_$name failed"
      fi
    fi
  done
done < /fxlab/nics
ip route add default via 10.0.2.2 dev mgmt 2>/dev/null
while read -r dest via; do
  [ -n "$dest" ] && { ip route add "$dest" via "$via" || say "route $dest via $via failed"; }
done < /fxlab/routes
# a plain login shell: the host's root .bashrc (pyenv init...) is slow under TCG
sed -i 's#^\(root:.*:\)[^:]*$#\1/bin/sh#' /etc/passwd
cp /fxlab/hosts /etc/hosts
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
say "ready"
while :; do
  sleep 3600 &
  wait $!
done
