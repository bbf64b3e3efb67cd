#!/bin/sh
# nm.sh — host under test 1: NetworkManager and firewalld active.
. /hut/lib.sh
snap_service() {
  echo "## nmcli connection show"; nmcli -t -f NAME,UUID,TYPE,DEVICE connection show | sort
  echo "## firewall-cmd --list-all-zones (--list-all for every zone)"; firewall-cmd --list-all-zones
  # The permanent configuration is these files (a --permanent change writes
  # /etc/firewalld/zones/<zone>.xml): read directly, as
  # `firewall-cmd --permanent --list-all-zones` took 3.5-5 s of TCG per snap.
  echo "## /etc/firewalld (the permanent configuration)"
  find /etc/firewalld -type f | sort | while read -r f; do echo "# $f"; cat "$f"; done
}
settle NetworkManager.service firewalld.service dbus.service
nm-online -s -q -t 120
# firewalld is Python; under nested TCG on a loaded machine it can miss
# systemd's default 90 s start timeout at boot (boot.diag then says so).
# Start it again without that timeout; systemctl start returns once it is
# on D-Bus, but it answers --state "running" only after loading its rules.
if ! systemctl is-active -q firewalld; then
  mkdir -p /run/systemd/system/firewalld.service.d
  printf '[Service]\nTimeoutStartSec=infinity\n' > /run/systemd/system/firewalld.service.d/hut.conf
  systemctl daemon-reload && systemctl start firewalld
fi
# Wait while the unit runs, with a deadline; if it exits, its journal goes
# into firewalld.state beside the answer.
deadline=$(( $(date +%s) + 600 ))
until firewall-cmd --state > "$OUT/firewalld.state" 2>&1; do
  if ! systemctl is-active -q firewalld || [ "$(date +%s)" -gt $deadline ]; then
    journalctl -b --no-pager -u firewalld | tail -n 20 >> "$OUT/firewalld.state"
    break
  fi
  sleep 2
done
{ NetworkManager --version; firewall-cmd --version; systemctl --version | head -n 1; } > "$OUT/versions" 2>&1

# The script's own NetworkManager changes (the user's, in the story) wait
# for their effect: under a loaded TCG an nmcli call can give up after
# libnm's 25 s D-Bus timeout while NetworkManager still carries the change
# out later (stop 37's CI: a hand-made connection arrived after the delete
# meant for it and stayed into the next part). Each connection gets its
# UUID here, so the wait is for exactly that connection.
new_uuid() { cat /proc/sys/kernel/random/uuid; }
# nm_add UUID ARGS...: nmcli connection add ARGS with that UUID, listed.
nm_add() { u=$1; shift; nmcli connection add "$@" connection.uuid "$u" > /dev/null 2>&1; nm_wait "$u" present; }
# nm_del UUID: nmcli connection delete, no longer listed.
nm_del() { nmcli connection delete uuid "$1" > /dev/null 2>&1; nm_wait "$1" absent; }
# nm_wait UUID present|absent: wait, deadline 3 min, until NetworkManager
# lists (or no longer lists) UUID; a listing that fails counts as neither.
# Missing the deadline is a script error (out/script.errors).
nm_wait() {
  [ -n "$1" ] || { script_error "NetworkManager: no UUID to wait for ($2)"; return; }
  deadline=$(( $(date +%s) + 180 ))
  while [ "$(date +%s)" -le $deadline ]; do
    if l=$(nmcli -t -f UUID connection show 2>/dev/null); then
      if echo "$l" | grep -qixF -e "$1"; then [ "$2" = present ] && return 0
      else [ "$2" = absent ] && return 0; fi
    fi
    sleep 1
  done
  script_error "NetworkManager: connection $1 not $2 after 180 s"
}

# fw_port add|remove PORT: the user's runtime PORT in the active trusted
# zone, then wait (deadline 3 min) until firewalld answers --query-port so
# (firewall-cmd's D-Bus call can time out under load as nmcli's can).
fw_port() {
  firewall-cmd --zone=trusted "--$1-port=$2" > /dev/null 2>&1
  want=yes; [ "$1" = remove ] && want=no
  deadline=$(( $(date +%s) + 180 ))
  until [ "$(firewall-cmd --zone=trusted "--query-port=$2" 2>/dev/null)" = "$want" ]; do
    [ "$(date +%s)" -gt $deadline ] && { script_error "firewalld: --$1-port=$2 not in effect after 180 s"; return; }
    sleep 2
  done
}

part_transaction() {
  snap before
  step preflight barn-net preflight
  step plan barn-net plan
  step install barn-net install --yes
  step status barn-net status
  step preflight-installed barn-net preflight
  snap installed
  cp /var/lib/barn/network.json "$OUT/manifest.installed"
  nmcli -t -f connection.uuid,connection.zone,bridge.stp,bridge.mac-address,ipv4.addresses connection show barn0 > "$OUT/barn0.conn" 2>&1
  ip -o link show barn0 > "$OUT/barn0.link" 2>&1
  firewall-cmd --get-zone-of-interface=barn0 > "$OUT/barn0.zone" 2>&1
  echo '{"schema":"barn.hosts/v1","entries":[{"address":"10.10.10.11","names":["pg-meta-1"]}]}' > /tmp/hosts.json
  STDIN=/tmp/hosts.json step hosts-install barn-net hosts install --yes
  getent hosts pg-meta-1 > "$OUT/hosts-resolve" 2>&1
  step hosts-uninstall barn-net hosts uninstall --yes
  step reinstall barn-net install --yes
  since=$(date '+%F %T')
  step uninstall barn-net uninstall --yes
  # What NetworkManager and firewalld did during uninstall (for the README's
  # findings: which of them released barn0's trusted binding).
  journalctl --since "$since" --no-pager -o short-monotonic -u NetworkManager -u firewalld > "$OUT/uninstall.journal" 2>&1
  snap after

}
part_leftovers() {
  # What an earlier install left with Barn's mark (bridge.mac-address) and no
  # manifest counting it: the next install removes it first, when it is a
  # connection, only by a UUID Barn recorded (its ledger); and a connection
  # deleted behind Barn's back leaves a bridge uninstall removes.
  snap lo-before
  MAC=$(barn-net plan | sed -n 's/.*bridge\.mac-address \([0-9a-f:]*\).*/\1/p' | head -n 1)
  echo "$MAC" > "$OUT/mac"
  # A copy of Barn's connection made by hand (its name and mark, a UUID Barn
  # never chose): not Barn's. Install refuses it and it stays.
  C=$(new_uuid)
  nm_add "$C" type bridge con-name barn0 ifname barn0 ipv4.method manual ipv4.addresses 10.10.10.1/24 \
    ipv6.method disabled bridge.stp no bridge.mac-address "$MAC" connection.zone trusted
  step copy-install barn-net install --yes
  nmcli -t -f NAME,TYPE connection show > "$OUT/copy.nm" 2>&1
  nm_del "$C"
  # A late add: install killed right after recording the UUID it hands to
  # nmcli connection add, and the uninstall that backs it out, which keeps
  # that record; then NetworkManager adds the connection under that UUID
  # (as an add that timed out and was carried out later), active, trusted.
  step late-crash env BARN_NET_TEST_CRASH_AFTER=install:nm-uuid-recorded barn-net install --yes
  step late-rollback barn-net uninstall --yes
  ls /var/lib/barn > "$OUT/late-ledger.ls" 2>&1
  U=$(sed -n 's/.*"uuid": "\([^"]*\)".*/\1/p' /var/lib/barn/nm-uuids.json | head -n 1)
  echo "$U" > "$OUT/late-uuid"
  nm_add "$U" type bridge con-name barn0 ifname barn0 ipv4.method manual ipv4.addresses 10.10.10.1/24 \
    ipv6.method disabled bridge.stp no bridge.mac-address "$MAC" connection.zone trusted
  nmcli connection up uuid "$U" > /dev/null 2>&1
  step late-plan barn-net plan
  step late-install barn-net install --yes
  step late-uninstall barn-net uninstall --yes
  snap late-after
  # A bridge with Barn's mark and nothing recording it.
  ip link add barn0 address "$MAC" type bridge
  step leftlink-plan barn-net plan
  step leftlink-install barn-net install --yes
  # Barn's connection deleted behind its back (as a killed or timed-out
  # delete leaves it), its bridge still there.
  U=$(sed -n '/"nm_connection"/,/}/s/.*"uuid": "\([^"]*\)".*/\1/p' /var/lib/barn/network.json)
  nm_del "$U"
  ip link show barn0 > /dev/null 2>&1 || ip link add barn0 address "$MAC" type bridge
  ip -o link show barn0 > "$OUT/gone.link" 2>&1
  step gone-uninstall barn-net uninstall --yes
  snap lo-after

}
part_foreign() {
  snap foreign-before
  # Both NetworkManager and systemd-networkd active: the documented decision.
  systemctl start systemd-networkd.service
  step both-plan barn-net plan
  systemctl stop systemd-networkd.service systemd-networkd.socket

  # Foreign objects stay foreign.
  C=$(new_uuid)
  nm_add "$C" type bridge con-name barn0 ifname barn0 ipv4.method disabled ipv6.method disabled
  step foreign-conn-plan barn-net plan
  nm_del "$C"
  link_gone barn0
  ip link add barn0 type bridge
  ip -o link show barn0 > "$OUT/foreign-link.link" 2>&1
  step foreign-link-plan barn-net plan
  nmcli -t -f NAME,TYPE,DEVICE connection show --active > "$OUT/foreign-link.nm" 2>&1
  ip link del barn0
  step fw-install barn-net install --yes
  # The user opens a port in the active trusted zone (runtime: a reload
  # or a rewrite of the zone by uninstall would lose it).
  fw_port add 8080/tcp
  echo '# an admin note' >> /etc/qemu/bridge.conf
  step modified-uninstall barn-net uninstall --yes
  sed -i '/^# an admin note$/d' /etc/qemu/bridge.conf
  step fw-uninstall barn-net uninstall --yes
  firewall-cmd --zone=trusted --list-ports > "$OUT/fw-kept" 2>&1
  fw_port remove 8080/tcp
  step replaced-install barn-net install --yes
  nm_del "$(sed -n '/"nm_connection"/,/}/s/.*"uuid": "\([^"]*\)".*/\1/p' /var/lib/barn/network.json)"
  C=$(new_uuid)
  nm_add "$C" type bridge con-name barn0 ifname barn0 ipv4.method disabled ipv6.method disabled
  step replaced-uninstall barn-net uninstall --yes
  nmcli -t -f NAME,TYPE connection show > "$OUT/replaced.nm" 2>&1
  nm_del "$C"
  link_gone barn0
  snap foreign-after

}
part_crashes() {
  . /hut/crash.sh
  crash_every_step ""
}

# Each part the test asked for (the share's parts file), in order.
for p in transaction leftovers foreign crashes; do
  part "$p" && "part_$p"
done
exit 0
