# lib.sh — helpers of the host-under-test scripts (nm.sh, networkd.sh).
# They run as root inside a Debian 12 guest with systemd as PID 1 (built by
# scripts/build-hostimage.sh), from the 9p share /hut that TestHostUnderTest
# fills. They only record: every barn-net run leaves <name>.out, .err and
# .rc in /hut/out, every snapshot <name>.snap; the Go test judges them.
set -u
OUT=/hut/out
mkdir -p "$OUT"
export PATH=/hut:$PATH # barn-net, so its printed hints run verbatim
HELPER=/usr/lib/qemu/qemu-bridge-helper

# step NAME CMD...: run CMD (stdin from /dev/null unless STDIN is set).
step() {
  n=$1; shift
  "$@" > "$OUT/$n.out" 2> "$OUT/$n.err" < "${STDIN:-/dev/null}"
  echo $? > "$OUT/$n.rc"
}

# follow NAME: run the "next:" hint the refusal NAME printed (if any) as
# step NAME-next.
follow() {
  hint=$(sed -n 's/^next: //p' "$OUT/$1.err" | head -n 1)
  [ -n "$hint" ] && step "$1-next" sh -c "$hint"
  return 0
}

# plan_ids FILE: the step IDs of the plan JSON in FILE, in order.
plan_ids() { sed -n 's/^ *"id": "\([^"]*\)",*$/\1/p' "$1"; }

# snap NAME: the host network as the services themselves show it.
snap() {
  {
    echo "## links and addresses (ip -br)"; ip -br link | awk '{print $1, $2}' | sort; ip -br addr | sort
    echo "## routes"; ip route | sort
    echo "## helper mode"; stat -c '%a %U:%G %n' "$HELPER"
    echo "## /etc/qemu"; ls -la /etc/qemu 2>&1 | sed 1d | awk '{print $1, $3, $4, $NF}'
    echo "## bridge.conf"; cat /etc/qemu/bridge.conf 2>&1
    echo "## /etc/hosts"; cat /etc/hosts
    echo "## barn state"; ls -la /var/lib/barn 2>&1 | sed 1d | awk '{print $1, $NF}'
    snap_service
  } > "$OUT/$1.snap" 2>&1
}
