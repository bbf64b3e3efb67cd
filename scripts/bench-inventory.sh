#!/bin/sh
# bench-inventory.sh: resolve the same 20-node inventory with Barn and with
# `ansible-inventory --list`, in the same run, and print the medians and the
# ratio. Barn is measured twice: in process (BenchmarkResolve20, ns/op) and
# as a whole process (barn-inventory resolve), which is the fair comparison
# with ansible-inventory's process time.
#   usage: scripts/bench-inventory.sh [RUNS]   (default 7)
set -eu
runs=${1:-7}
root=$(cd "$(dirname "$0")/.." && pwd)
inv="$root/lib/inventory/testdata/bench20.yml"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v ansible-inventory >/dev/null || { echo "bench-inventory: ansible-inventory not installed (apt-get install ansible)" >&2; exit 3; }

(cd "$root/barn-inventory" && go build -o "$tmp/barn-inventory" .)
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
now_ns() { date +%s%N; }

i=0; : >"$tmp/barn"; : >"$tmp/ansible"
while [ "$i" -lt "$runs" ]; do
  t0=$(now_ns); "$tmp/barn-inventory" resolve -f "$inv" >/dev/null 2>&1; t1=$(now_ns)
  echo $(( (t1 - t0) / 1000 )) >>"$tmp/barn"
  t0=$(now_ns); ansible-inventory -i "$inv" --list >/dev/null 2>&1; t1=$(now_ns)
  echo $(( (t1 - t0) / 1000 )) >>"$tmp/ansible"
  i=$((i + 1))
done
lib_ns=$(cd "$root/lib" && go test -run '^$' -bench BenchmarkResolve20 -count "$runs" ./inventory/ | awk '/^BenchmarkResolve20/ {print $3}' | median)
barn_us=$(median <"$tmp/barn")
ans_us=$(median <"$tmp/ansible")
echo "inventory:                       $inv (20 nodes), $runs runs"
echo "BenchmarkResolve20 (in process): median $(awk "BEGIN{printf \"%.3f\", $lib_ns/1e6}") ms/op"
echo "barn-inventory resolve (process): median $(awk "BEGIN{printf \"%.1f\", $barn_us/1e3}") ms"
echo "ansible-inventory --list:         median $(awk "BEGIN{printf \"%.1f\", $ans_us/1e3}") ms"
echo "ratio ansible/barn (process):     $(awk "BEGIN{printf \"%.1f\", $ans_us/$barn_us}")x"
echo "ratio ansible/barn (in process):  $(awk "BEGIN{printf \"%.0f\", $ans_us*1000/$lib_ns}")x"
