#!/bin/sh
# networkd.sh — hosts under test 2 and 3 in one boot of the networkd image
# (NetworkManager absent): neither service active, networkd inactive with a
# unit that would claim the real NIC and with one that is safe, then
# networkd active; and the kernel's network faults.
. /hut/lib.sh
U=systemd-networkd
snap_service() {
  echo "## networkctl list"; networkctl list --no-legend 2>&1 | awk '{print $2, $3, $4, $5}' | sort
  echo "## unit files"
  for f in /etc/systemd/network/*; do [ -e "$f" ] && { echo "# $f"; cat "$f"; }; done
  echo "## units"
  for u in $U.service $U.socket; do echo "$u $(systemctl is-active $u) $(systemctl is-enabled $u)"; done
}
nic=$(ip -br link | awk '$1 != "lo" {print $1; exit}')
echo "$nic" > "$OUT/nic"
{ systemctl --version | head -n 1; } > "$OUT/versions" 2>&1
settle systemd-networkd.service

# networkd_active: networkd running and managing the NIC (idempotent: the
# transaction part ends so, and the later parts start so when it did not
# run).
networkd_active() {
  printf '[Match]\nName=%s\n\n[Network]\nDHCP=yes\n' "$nic" > /etc/systemd/network/10-nic.network
  systemctl start $U.service
  /lib/systemd/systemd-networkd-wait-online -i "$nic" --timeout=90
  # "routable" comes before the router advertisement's address, and the RA
  # (QEMU's user network sends one) turns "configured" back to
  # "configuring": wait, with a deadline, until the NIC has its global IPv6
  # address and networkd says it is configured, or "before" races it.
  deadline=$(( $(date +%s) + 120 ))
  until networkctl list "$nic" --no-legend | grep -qw configured && [ -n "$(ip -6 addr show dev "$nic" scope global)" ] ||
    [ "$(date +%s)" -gt $deadline ]; do sleep 1; done
}

part_transaction() {
  # Neither NetworkManager nor networkd: netlink.
  snap netlink-before
  step netlink-plan barn-net plan
  step netlink-install barn-net install --yes
  step netlink-uninstall barn-net uninstall --yes
  snap netlink-after

  # networkd inactive; a .network unit that would claim the real NIC.
  printf '[Match]\nName=en*\n\n[Network]\nDHCP=yes\n' > /etc/systemd/network/20-wired.network
  step unsafe-plan barn-net plan --backend networkd
  step unsafe-preflight barn-net preflight
  rm /etc/systemd/network/20-wired.network

  # networkd inactive; a unit that matches no link: activation is safe.
  printf '[Match]\nName=nothing0\n\n[Network]\nDHCP=yes\n' > /etc/systemd/network/30-other.network
  snap safe-before
  step safe-plan barn-net plan --backend networkd
  step safe-install barn-net install --yes --backend networkd
  snap safe-installed
  step safe-uninstall barn-net uninstall --yes
  snap safe-after
  rm /etc/systemd/network/30-other.network
  systemctl stop $U.service $U.socket

  networkd_active
  snap before
  step preflight barn-net preflight
  step plan barn-net plan
  step install barn-net install --yes
  step status barn-net status
  step preflight-installed barn-net preflight
  snap installed
  cp /var/lib/barn/network.json "$OUT/manifest.installed"
  networkctl status barn0 --no-pager > "$OUT/barn0.networkctl" 2>&1
  echo '{"schema":"barn.hosts/v1","entries":[{"address":"10.10.10.11","names":["pg-meta-1"]}]}' > /tmp/hosts.json
  STDIN=/tmp/hosts.json step hosts-install barn-net hosts install --yes
  getent hosts pg-meta-1 > "$OUT/hosts-resolve" 2>&1
  step hosts-uninstall barn-net hosts uninstall --yes
  step uninstall barn-net uninstall --yes
  snap after

}
part_foreign() {
  networkd_active
  snap foreign-before
  # Foreign objects stay foreign.
  printf '[NetDev]\nName=barn0\nKind=bridge\n' > /etc/systemd/network/80-barn0.netdev
  step foreign-unit-plan barn-net plan
  rm /etc/systemd/network/80-barn0.netdev
  ip link add barn0 type bridge
  step foreign-link-plan barn-net plan
  ip link del barn0
  step modified-install barn-net install --yes
  echo '# an admin note' >> /etc/systemd/network/80-barn0.network
  step modified-uninstall barn-net uninstall --yes
  sed -i '/^# an admin note$/d' /etc/systemd/network/80-barn0.network
  step modified-uninstall2 barn-net uninstall --yes
  snap foreign-after

}
part_crashes() {
  networkd_active
  . /hut/crash.sh
  crash_every_step ""
}
# barn-net's network faults on Debian's own kernel (the CI host's has no
# netem): lib/hostnet's live fault tests, /hut/hostnet.test, make their
# own namespace, barn0, stand-in nodes and taps; with BARN_REQUIRE_NETEM=1
# they fail instead of passing on a refusal when the kernel cannot delay.
part_faults() {
  uname -r > "$OUT/kernel"
  (cd /tmp && export BARN_REQUIRE_NETEM=1 && step faults /hut/hostnet.test -test.run '^TestLiveFaults' -test.v -test.count=1 -test.timeout 30m)
}

# Each part the test asked for (the share's parts file), in order.
for p in transaction foreign crashes faults; do
  part "$p" && "part_$p"
done
exit 0
