# lib.sh — helpers of the host-under-test scripts (nm.sh, networkd.sh).
# They run as root inside a Debian 12 guest with systemd as PID 1 (built by
# scripts/build-hostimage.sh), from the 9p share /hut that TestHostUnderTest
# fills. They only record: every barn-net run leaves <name>.out, .err and
# .rc in /hut/out, every snapshot <name>.snap; the Go test judges them.
set -u
OUT=/hut/out
mkdir -p "$OUT"
echo "start $(date +%s)" >> "$OUT/times"
trap 'echo "end $(date +%s)" >> "$OUT/times"' EXIT
# barn-net on PATH, so its printed hints run verbatim: a copy on the
# guest's disk, as exec from the 9p share (mounted without a page cache)
# costs about 0.6 s of TCG per run.
install -D -m 0755 /hut/barn-net /usr/local/lib/hut/barn-net
export PATH=/usr/local/lib/hut:/hut:$PATH
HELPER=/usr/lib/qemu/qemu-bridge-helper

# part NAME: whether the test asked for part NAME (the share's parts file,
# from BARN_TEST_HUT_PARTS); when it did, stamps its start in out/times.
part() {
  grep -qw "$1" /hut/parts || return 1
  PART=$1
  echo "$1 $(date +%s)" >> "$OUT/times"
}

# script_error MSG: the script could not bring about what its part needs
# next (a user's change that never took effect): out/script.errors gets
# "PART: MSG", which fails that part in the Go test.
script_error() {
  echo "${PART:-boot}: $*" >> "$OUT/script.errors"
  return 1
}

# settle: wait, with a deadline, until systemd has finished the boot's other
# jobs (under TCG the services take minutes to start; a script that starts
# before them meets D-Bus timeouts), then record the boot's state in out/boot.diag:
# the failed units and, for each unit named, its status and journal.
settle() {
  # (not is-system-running --wait: hut.service's own job keeps the boot
  # "starting" until this script ends.)
  deadline=$(( $(date +%s) + 900 ))
  while systemctl list-jobs --no-legend | grep -qv 'hut\.service'; do
    [ "$(date +%s)" -gt $deadline ] && { systemctl list-jobs --no-pager > "$OUT/boot.state"; break; }
    sleep 2
  done
  echo "settled $(date +%s)" >> "$OUT/times"
  {
    echo "## systemctl --failed"; systemctl --failed --no-legend --no-pager
    echo "## systemd-analyze"; systemd-analyze 2>&1 | head -n 1
    for u in "$@"; do
      echo "## $u"; systemctl status "$u" --no-pager -n 0 2>&1
      journalctl -b --no-pager -o short-monotonic -u "$u" 2>&1 | tail -n 40
    done
  } > "$OUT/boot.diag" 2>&1
}

# step NAME CMD...: run CMD (stdin from /dev/null unless STDIN is set);
# out/steps gets "NAME SECONDS" (what the part's time went on).
step() {
  n=$1; shift
  t0=$(date +%s)
  "$@" > "$OUT/$n.out" 2> "$OUT/$n.err" < "${STDIN:-/dev/null}"
  echo $? > "$OUT/$n.rc"
  echo "$n $(( $(date +%s) - t0 ))" >> "$OUT/steps"
}

# follow NAME: run the "next:" hint the refusal NAME printed (if any) as
# step NAME-next.
follow() {
  hint=$(sed -n 's/^next: //p' "$OUT/$1.err" | head -n 1)
  [ -n "$hint" ] && step "$1-next" sh -c "$hint"
  return 0
}

# link_gone NAME: wait (deadline 2 min) until the link NAME is gone:
# NetworkManager removes the software device of a deleted connection
# after `nmcli connection delete` returns.
link_gone() {
  deadline=$(( $(date +%s) + 120 ))
  while ip link show "$1" > /dev/null 2>&1; do
    [ "$(date +%s)" -gt $deadline ] && { script_error "the link $1 still there after 120 s"; return; }
    sleep 0.2
  done
}

# plan_ids FILE: the step IDs of the plan JSON in FILE, in order.
# barn-net prints canonical (compact) JSON; an indented one reads the same.
plan_ids() { grep -o '"id": *"[^"]*"' "$1" | sed 's/^"id": *"//; s/"$//'; }

# snap NAME: the host network as the services themselves show it.
snap() {
  t0=$(date +%s)
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
  echo "snap:$1 $(( $(date +%s) - t0 ))" >> "$OUT/steps"
}
