#!/usr/bin/env bash
# bench.sh — `make bench`: run every Barn benchmark once, in one run on this
# machine, and write docs/BENCHMARKS.md (medians, and ratios against the peer
# tool measured in the same run).
#
# Items (issue 8, "the first benchmark report"):
#   inventory resolve, 20 nodes      BenchmarkResolve20 + barn-inventory resolve
#                                    vs ansible-inventory --list, same file
#   plan, 20 nodes vs 20 applied     BenchmarkPlan20 (lib/plan), target < 10 ms
#   apply overhead per node          BenchmarkApplyPerNode (barn-node/cli), fake
#                                    QEMU (target < 150 ms) and real QEMU (TCG)
#   no-op apply, running 3-node lab  BenchmarkNoopApply3 (barn-node/cli), fake
#                                    QEMU (target < 50 ms)
#   launch to QMP identity           BenchmarkLaunchFake (lib/vm)
#   start per node, base re-verified BenchmarkStartPerNode (barn-node/cli),
#                                    fake QEMU, tiny vs 1 GiB base
#   image verification               BenchmarkSHA256 (lib/imagecache) vs
#                                    sha256sum, 1 GiB, target >= 0.9x
#   header inspection                BenchmarkHeader (lib/qcow2) vs qemu-img
#                                    info, target >= 10x
#   readiness detection latency      BenchmarkReadinessDetection (lib/guest),
#                                    target < 1 s
#   start-up of every tool           scripts/bench-startup.sh: version and
#                                    --help vs jq --version, same loop
#   snapshot restore, 3-node lab     scripts/bench-snapshot.sh: restore of a
#                                    running lab vs recreate and boot, same run
#   time to ready, 2-node lab        barn-node apply in a private network
#                                    namespace (as testscripts/lab_test.go),
#                                    vs the guests' own boot time read from
#                                    their serial logs
#
# Environment:
#   BENCH_COUNT=N   repetitions per Go benchmark (default 5); medians of N
#   BENCH_QUICK=1   hash 128 MiB instead of 1 GiB
#   BENCH_LAB=0     skip the real lab (it needs root, QEMU and the image)
#   BENCH_OUT=PATH  where to write the report (default docs/BENCHMARKS.md)
#   BARN_BENCH_REPO=DIR  an image repository (default: scripts/build-image.sh)
# Progress goes to stderr; the report path is printed on stdout at the end.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
count=${BENCH_COUNT:-5}
quick=${BENCH_QUICK:-0}
out=${BENCH_OUT:-$root/docs/BENCHMARKS.md}
GO=${GO:-go}
if [ "$quick" = 1 ]; then hash_bytes=$((128 << 20)); hash_label="128 MiB"
else hash_bytes=$((1 << 30)); hash_label="1 GiB"; fi

log() { printf 'bench: %s\n' "$*" >&2; }
now_ns() { date +%s%N; }
work=$(mktemp -d /tmp/barn-bench.XXXXXX)

# --- cleanup of the lab (set up later); always runs.
lab_ns="" lab_rt="" lab_home="" lab_etc_qemu_created=0
cleanup() {
	if [ -n "$lab_ns" ]; then
		[ -n "$lab_home" ] && log "cleaning up the lab (namespace $lab_ns)"
		if [ -n "$lab_home" ] && [ -d "$lab_home" ]; then
			ip netns exec "$lab_ns" barn-node destroy --force --purge >/dev/null 2>>"$work/cleanup.err" || true
			ip netns exec "$lab_ns" barn-net uninstall --yes >/dev/null 2>>"$work/cleanup.err" || true
		fi
		kill_lab_qemu
		ip netns del "$lab_ns" 2>/dev/null || true
		rm -rf "/etc/netns/$lab_ns"
		rmdir /etc/netns 2>/dev/null || true
		[ "$lab_etc_qemu_created" = 1 ] && rmdir /etc/qemu 2>/dev/null || true
		[ -n "$lab_rt" ] && rm -rf "$lab_rt"
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# kill_lab_qemu SIGKILLs any QEMU whose command line names this lab's state
# root or runtime directory (only after destroy failed to stop it).
kill_lab_qemu() {
	local p cmd pid
	for p in /proc/[0-9]*/cmdline; do
		cmd=$(tr '\0' ' ' <"$p" 2>/dev/null) || continue
		case $cmd in *qemu*) ;; *) continue ;; esac
		if { [ -n "$lab_home" ] && [[ $cmd == *"$lab_home"* ]]; } || { [ -n "$lab_rt" ] && [[ $cmd == *"$lab_rt"* ]]; }; then
			pid=${p#/proc/}; pid=${pid%/cmdline}
			kill -9 "$pid" 2>/dev/null || true
		fi
	done
}

# median: the median of the numbers on stdin (one per line); NaN when none.
median() {
	sort -g | awk '{v[NR] = $1} END {if (NR == 0) {print "NaN"; exit}
		print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
# bench_median FILE NAME UNIT: median over the -count repetitions of the
# value printed before UNIT on the benchmark lines named NAME (the -P suffix
# for GOMAXPROCS is ignored).
bench_median() {
	awk -v name="$2" -v unit="$3" '{n = $1; sub(/-[0-9]+$/, "", n)}
		n == name {for (i = 2; i <= NF; i++) if ($i == unit) print $(i - 1)}' "$1" | median
}
# calc EXPR [FORMAT]: awk arithmetic; prints "n/a" when an operand is NaN.
calc() {
	case $1 in *NaN* | *n/a* | *nan*) echo n/a; return ;; esac
	awk "BEGIN {printf \"${2:-%.2f}\", $1}"
}
# verdict VALUE OP TARGET: "met" or "**not met**" (n/a stays n/a).
verdict() {
	awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN {
		if (v == "n/a" || v == "NaN" || v == "") {print "n/a"; exit}
		ok = (op == "<") ? (v + 0 < t + 0) : (v + 0 >= t + 0)
		print ok ? "met" : "**not met**"}'
}

# --- the machine, described before anything runs.
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
t_start=$(now_ns)
cpu_model=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo)
cores=$(nproc)
mem=$(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
kernel="$(uname -sr)"
os_name=$( (. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-unknown}") || echo unknown)
qemu_version=$( (qemu-system-x86_64 --version 2>/dev/null || echo "not installed") | head -1)
qemu_img_version=$( (qemu-img --version 2>/dev/null || echo "not installed") | head -1)
# KVM is usable when QEMU can start a paused q35 VM with -cpu host, the
# same smoke test Barn's profile detection runs (a /dev/kvm that opens is not
# enough: some hosts expose one whose vCPUs QEMU aborts on).
kvm_ok=0
if [ -e /dev/kvm ] && command -v qemu-system-x86_64 >/dev/null; then
	qemu-system-x86_64 -accel kvm -machine q35 -cpu host -display none -nodefaults -no-user-config -S >/dev/null 2>&1 &
	smoke=$!
	sleep 0.5
	if kill -0 "$smoke" 2>/dev/null; then kvm_ok=1; kill "$smoke" 2>/dev/null; fi
	wait "$smoke" 2>/dev/null || true
fi
if [ "$kvm_ok" = 1 ]; then
	accel="KVM is usable here (a paused -cpu host VM starts), but every real-QEMU figure below was taken under **TCG** (\`BARN_ACCEL=tcg\`), as the end-to-end suite runs"
elif [ -e /dev/kvm ]; then
	accel="TCG only: /dev/kvm exists but QEMU aborts on its vCPUs (Barn's smoke test refuses it); every real-QEMU figure below was taken under TCG (\`BARN_ACCEL=tcg\`)"
else
	accel="TCG only (no /dev/kvm): every real-QEMU figure below was taken under TCG (\`BARN_ACCEL=tcg\`)"
fi
go_version=$($GO version | awk '{print $3}')
ansible_version=$( (ansible-inventory --version 2>/dev/null || echo "not installed") | head -1)
revision=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
log "machine: $cpu_model, $cores cores, $mem, load $load_start"

# --- tools.
# `make bench` builds bin/ first; run alone, build what is missing.
mkdir -p "$root/bin"
for t in barn-inventory barn-plan barn-node barn-net barn-repo barn-state; do
	[ -x "$root/bin/$t" ] || { log "building $t"; (cd "$root" && $GO build -o "bin/$t" "./$t"); }
done
export PATH="$root/bin:$PATH"

# --- 1. Go benchmarks in lib (default bench time, COUNT repetitions).
log "lib benchmarks: resolve, plan, header, launch (count $count)"
(cd "$root/lib" && $GO test -run '^$' -bench '^(BenchmarkResolve20|BenchmarkPlan20|BenchmarkHeader|BenchmarkLaunchFake)$' \
	-count "$count" ./inventory ./plan ./qcow2 ./vm) >"$work/lib.txt"
log "SHA-256 of $hash_label vs sha256sum (count $count)"
# TMPDIR: the benchmark's hashed file lands in (and leaves with) $work.
(cd "$root/lib" && TMPDIR=$work BARN_BENCH_BYTES=$hash_bytes $GO test -run '^$' -bench '^BenchmarkSHA256$' -benchtime 1x \
	-count "$count" ./imagecache) >"$work/sha.txt"
log "readiness detection latency (count $count)"
(cd "$root/lib" && $GO test -run '^$' -bench '^BenchmarkReadinessDetection$' -benchtime 3x \
	-count "$count" ./guest) >"$work/ready.txt"
log "apply overhead per node, fake QEMU (count $count)"
(cd "$root/barn-node" && $GO test -run '^$' -bench '^BenchmarkApplyPerNode$' -count "$count" ./cli) >"$work/apply-fake.txt"
log "no-op apply of a running 3-node lab, fake QEMU (count $count)"
(cd "$root/barn-node" && $GO test -run '^$' -bench '^BenchmarkNoopApply3$' -benchtime 20x -count "$count" ./cli) >"$work/noop.txt"
log "start per node with the base re-verified, fake QEMU, $hash_label base (count $count)"
(cd "$root/barn-node" && TMPDIR=$work BARN_BENCH_BYTES=$hash_bytes $GO test -run '^$' -bench '^BenchmarkStartPerNode$' -benchtime 3x \
	-count "$count" ./cli) >"$work/start.txt"
real_count=$(( count < 3 ? count : 3 ))
qemu_bin=$(command -v qemu-system-x86_64 || true)
if [ -n "$qemu_bin" ]; then
	log "apply overhead per node, real QEMU under TCG (count $real_count)"
	(cd "$root/barn-node" && BARN_BENCH_QEMU=$qemu_bin $GO test -run '^$' -bench '^BenchmarkApplyPerNode$/^nodes=(1|4)$' \
		-benchtime 2x -count "$real_count" ./cli) >"$work/apply-real.txt"
else
	: >"$work/apply-real.txt"
fi

resolve_ms=$(calc "$(bench_median "$work/lib.txt" BenchmarkResolve20 ns/op) / 1e6" %.3f)
plan_ms=$(calc "$(bench_median "$work/lib.txt" BenchmarkPlan20 ns/op) / 1e6" %.3f)
plan_cpu_ms=$(calc "$(bench_median "$work/lib.txt" BenchmarkPlan20 cpu-ns/op) / 1e6" %.3f)
inspect_us=$(calc "$(bench_median "$work/lib.txt" BenchmarkHeader/inspect ns/op) / 1e3" %.1f)
qemuimg_ms=$(calc "$(bench_median "$work/lib.txt" BenchmarkHeader/qemu-img-info ns/op) / 1e6" %.2f)
header_x=$(calc "$qemuimg_ms * 1000 / $inspect_us" %.0f)
launch_ms=$(calc "$(bench_median "$work/lib.txt" BenchmarkLaunchFake ns/op) / 1e6" %.1f)
sha_go=$(calc "$(bench_median "$work/sha.txt" BenchmarkSHA256/go MB/s)" %.0f)
sha_sum=$(calc "$(bench_median "$work/sha.txt" BenchmarkSHA256/sha256sum MB/s)" %.0f)
sha_x=$(calc "$sha_go / $sha_sum" %.2f)
ready_ms=$(calc "$(bench_median "$work/ready.txt" BenchmarkReadinessDetection ms-detect/op)" %.0f)
declare -A fake real
for n in 1 4 8; do fake[$n]=$(calc "$(bench_median "$work/apply-fake.txt" "BenchmarkApplyPerNode/nodes=$n" ms/node)" %.0f); done
for n in 1 4; do real[$n]=$(calc "$(bench_median "$work/apply-real.txt" "BenchmarkApplyPerNode/nodes=$n" ms/node)" %.0f); done
noop_ms=$(calc "$(bench_median "$work/noop.txt" BenchmarkNoopApply3 ms/apply)" %.1f)
start_tiny=$(calc "$(bench_median "$work/start.txt" "BenchmarkStartPerNode/base=tiny/nodes=1" ms/start)" %.0f)
start_large=$(calc "$(bench_median "$work/start.txt" "BenchmarkStartPerNode/base=large/nodes=1" ms/start)" %.0f)
start_large4=$(calc "$(bench_median "$work/start.txt" "BenchmarkStartPerNode/base=large/nodes=4" ms/start)" %.0f)
start_cost=$(calc "$start_large - $start_tiny" %.0f)
fake_worst=$(printf '%s\n' "${fake[1]}" "${fake[4]}" "${fake[8]}" | grep -v n/a | sort -g | tail -1)

# --- 2. inventory resolve as processes: barn-inventory vs ansible-inventory,
# interleaved so both see the same load.
inv="$root/lib/inventory/testdata/bench20.yml"
runs=$(( count < 7 ? 7 : count ))
: >"$work/inv-barn"; : >"$work/inv-ansible"
if command -v ansible-inventory >/dev/null; then
	log "barn-inventory resolve vs ansible-inventory --list ($runs runs each)"
	"$root/bin/barn-inventory" resolve -f "$inv" >/dev/null 2>&1 # warm the page cache
	ansible-inventory -i "$inv" --list >/dev/null 2>&1 || true
	for _ in $(seq "$runs"); do
		t0=$(now_ns); "$root/bin/barn-inventory" resolve -f "$inv" >/dev/null 2>&1; t1=$(now_ns)
		echo $(( (t1 - t0) / 1000 )) >>"$work/inv-barn"
		t0=$(now_ns); ansible-inventory -i "$inv" --list >"$work/ansible.json" 2>/dev/null; t1=$(now_ns)
		echo $(( (t1 - t0) / 1000 )) >>"$work/inv-ansible"
	done
	ans_hosts=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["_meta"]["hostvars"]))' "$work/ansible.json" 2>/dev/null || echo "?")
else
	log "ansible-inventory is not installed: the inventory comparison is skipped"
	ans_hosts="?"
fi
barn_inv_ms=$(calc "$(median <"$work/inv-barn") / 1e3" %.1f)
ans_inv_ms=$(calc "$(median <"$work/inv-ansible") / 1e3" %.0f)
inv_x=$(calc "$(median <"$work/inv-ansible") / $(median <"$work/inv-barn")" %.1f)
inv_lib_x=$(calc "$(median <"$work/inv-ansible") / 1e3 / $resolve_ms" %.0f)

# --- 3. a real two-node lab: time to ready vs the guests' own boot time.
lab_status="not run"
lab_wall="n/a" lab_boot="n/a" lab_x="n/a" lab_over="n/a" lab_nodes=""
run_lab() {
	if [ "${BENCH_LAB:-1}" = 0 ]; then lab_status="skipped (BENCH_LAB=0)"; return; fi
	if [ "$(id -u)" != 0 ]; then lab_status="skipped: needs root for a network namespace"; return; fi
	if [ -z "$qemu_bin" ]; then lab_status="skipped: qemu-system-x86_64 is not installed"; return; fi
	local repo=${BARN_BENCH_REPO:-}
	if [ -z "$repo" ]; then
		log "building or reusing the guest image (scripts/build-image.sh)"
		repo=$("$root/scripts/build-image.sh") || { lab_status="skipped: scripts/build-image.sh failed"; return; }
	fi
	local lab="$work/lab"
	mkdir -p "$lab/home"
	lab_ns="barn-bench-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"
	ip netns add "$lab_ns"
	ip -n "$lab_ns" link set lo up
	# `ip netns exec` bind-mounts /etc/netns/NS/qemu over /etc/qemu, so the
	# bridge helper's bridge.conf is the namespace's own.
	if [ ! -e /etc/qemu ]; then mkdir /etc/qemu; lab_etc_qemu_created=1; fi
	mkdir -p "/etc/netns/$lab_ns/qemu"
	lab_rt=$(mktemp -d /tmp/barn-bench-rt.XXXXXX)
	lab_home="$lab/.barn"
	export BARN_HOME="$lab_home" BARN_NET_STATE="$lab/netstate" BARN_REPO="$repo" BARN_ACCEL=tcg \
		BARN_RUNTIME_DIR="$lab_rt" HOME="$lab/home"
	inns() { ip netns exec "$lab_ns" "$@"; }
	cat >"$lab/two.yml" <<-'YAML'
	all:
	  children:
	    infra:
	      hosts:
	        10.10.10.10: {nodename: meta, infra_seq: 1}
	    pg-test:
	      hosts:
	        10.10.10.11: {pg_seq: 1, pg_role: primary}
	      vars:
	        pg_cluster: pg-test
	  vars:
	    admin_ip: 10.10.10.10
	    vm_cpu: 1
	    vm_mem: 768
	    vm_disk: 8GiB
	    vm_disks:
	      - {path: /data, size: 1, persistent: true}
	YAML
	log "lab: barn-net install in namespace $lab_ns"
	inns barn-net install --yes >"$lab/net.json" 2>"$lab/net.err" || { lab_status="failed: barn-net install ($(tail -1 "$lab/net.err"))"; return; }
	barn-repo trust add "$repo/catalog.pub" >/dev/null 2>"$lab/repo.err" &&
		barn-repo update >/dev/null 2>>"$lab/repo.err" || { lab_status="failed: barn-repo ($(tail -1 "$lab/repo.err"))"; return; }
	barn-inventory resolve -f "$lab/two.yml" | barn-plan >"$lab/plan.json" 2>"$lab/plan.err" ||
		{ lab_status="failed: resolve | plan ($(tail -1 "$lab/plan.err"))"; return; }
	log "lab: barn-node apply (2 nodes, TCG); this takes a minute or two"
	local t0 t1
	t0=$(now_ns)
	if ! inns barn-node apply <"$lab/plan.json" >"$lab/apply.json" 2>"$lab/apply.err"; then
		lab_status="failed: barn-node apply ($(grep 'error:' "$lab/apply.err" | tail -1))"; return
	fi
	t1=$(now_ns)
	local ready
	ready=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(1 for n in d["nodes"] if n.get("ready")), len(d["nodes"]))' "$lab/apply.json" 2>/dev/null || echo "? ?")
	if [ "$ready" != "2 2" ]; then lab_status="failed: apply returned but ready/nodes = $ready"; return; fi
	lab_wall=$(calc "($t1 - $t0) / 1e9" %.1f)
	# The guest's own boot time: kernel uptime (the [ seconds ] prefix of the
	# serial console) when Barn's ready marker is written
	# ("barn-finalize: ready"), else cloud-init's "finished ... Up N seconds".
	local n f b worst=0
	for f in "$lab_home"/nodes/*/serial.log; do
		n=$(basename "$(dirname "$f")")
		b=$(awk '/barn-finalize: ready/ && match($0, /^\[ *[0-9]+\.[0-9]+\]/) {s = substr($0, RSTART + 1, RLENGTH - 2); gsub(/ /, "", s); v = s}
			END {if (v != "") print v}' "$f")
		if [ -z "$b" ]; then
			b=$(sed -n 's/.*Cloud-init v\. .* finished at .* Up \([0-9.]*\) seconds.*/\1/p' "$f" | tail -1)
		fi
		[ -n "$b" ] || b="n/a"
		[ "$b" != n/a ] && b=$(calc "$b" %.1f)
		lab_nodes+="${lab_nodes:+, }$n ${b} s"
		[ "$b" != n/a ] && worst=$(awk -v a="$worst" -v b="$b" 'BEGIN {print (b > a) ? b : a}')
	done
	if [ "$worst" != 0 ]; then
		lab_boot=$(calc "$worst" %.1f)
		lab_x=$(calc "$lab_wall / $worst" %.2f)
		lab_over=$(calc "$lab_wall - $worst" %.1f)
	fi
	lab_status="ok"
	log "lab: ready in $lab_wall s; guests' own boot: $lab_nodes"
	log "lab: destroy --purge, barn-net uninstall, netns del"
	inns barn-node destroy --force --purge >/dev/null 2>"$lab/destroy.err" || log "lab: destroy failed: $(tail -1 "$lab/destroy.err")"
	inns barn-net uninstall --yes >/dev/null 2>"$lab/uninstall.err" || log "lab: barn-net uninstall failed: $(tail -1 "$lab/uninstall.err")"
	lab_home="" # done: cleanup only removes the namespace and runtime dir
}
run_lab
# --- 4. snapshot restore vs recreate of a running 3-node lab (its own lab,
# namespace and cleanup; scripts/bench-snapshot.sh). Not run: the section
# of the previous report is kept.
snap_section=""
if [ "${BENCH_LAB:-1}" != 0 ] && [ "$(id -u)" = 0 ] && [ -n "$qemu_bin" ]; then
	log "snapshot restore vs recreate, 3-node lab (scripts/bench-snapshot.sh)"
	snap_section=$(BARN_BENCH_REPO=${BARN_BENCH_REPO:-} "$root/scripts/bench-snapshot.sh") || {
		log "bench-snapshot.sh failed; the previous snapshot section is kept"; snap_section=""; }
fi
cleanup_note="destroyed with \`barn-node destroy --force --purge\`, \`barn-net uninstall\`, \`ip netns del\`"

total_s=$(calc "($(now_ns) - $t_start) / 1e9" %.0f)
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# --- the report.
tmp_out="$work/BENCHMARKS.md"
{
cat <<EOF
# Barn benchmarks

Generated by \`make bench\` (\`scripts/bench.sh\`) on $started at revision
\`$revision\`, in one run of ${total_s} s. Every figure is the **median** of
$count repetitions unless the row says otherwise (Go benchmarks use
\`go test -bench -count=$count\`); every ratio compares two things measured in
the same run on the same machine. Regenerate with \`make bench\`
(\`BENCH_QUICK=1\` hashes 128 MiB instead of 1 GiB; \`BENCH_LAB=0\` skips the
real lab).

> **TCG figures are not performance evidence.** Every real QEMU guest in
> this report ran under TCG (\`BARN_ACCEL=tcg\`), software emulation that is
> one to two orders of magnitude slower than a KVM guest. The rows that
> involve a real QEMU ("real QEMU" apply overhead, time to ready) describe
> TCG on this machine only; they say nothing about a workstation with KVM.
> The host-side rows (resolve, plan, hashing, header, fake-QEMU apply,
> readiness detection) run no guest and are meaningful, within the noise of
> a shared 2-core machine (see the load average).

## Machine

| | |
| --- | --- |
| CPU | $cpu_model |
| cores | $cores |
| memory | $mem |
| OS, kernel | $os_name, $kernel |
| QEMU | $qemu_version; $qemu_img_version |
| accelerator | $accel |
| load average at start (1, 5, 15 min) | $load_start (at the end: $load_end) |
| Go | $go_version |
| Ansible | $ansible_version |

## Results

| item | Barn | peer, same run | ratio | target | verdict |
| --- | --- | --- | --- | --- | --- |
| inventory resolve, 20-node Pigsty file, as a process | $barn_inv_ms ms (\`barn-inventory resolve\`) | $ans_inv_ms ms (\`ansible-inventory --list\`, $ans_hosts hosts) | ${inv_x}× faster | — | report |
| inventory resolve, 20 nodes, in process | $resolve_ms ms/op (BenchmarkResolve20) | $ans_inv_ms ms (\`ansible-inventory --list\`) | ${inv_lib_x}× faster | — | report |
| plan, 20 desired nodes vs a 20-node applied state, decoding included | $plan_ms ms/op wall, $plan_cpu_ms ms/op CPU | — | — | < 10 ms | $(verdict "$plan_ms" "<" 10) |
| apply host-side overhead per node, fake QEMU | ${fake[1]} / ${fake[4]} / ${fake[8]} ms/node (1 / 4 / 8 nodes) | — | — | < 150 ms/node | $(verdict "$fake_worst" "<" 150) |
| no-op apply of a running 3-node lab, fake QEMU | $noop_ms ms (median apply) | — | — | < 50 ms | $(verdict "$noop_ms" "<" 50) |
| apply host-side overhead per node, real QEMU (TCG) | ${real[1]} / ${real[4]} ms/node (1 / 4 nodes; median of $real_count) | — | — | reported | report (TCG) |
| launch to QMP identity, fake QEMU | $launch_ms ms/op (BenchmarkLaunchFake) | — | — | — | report |
| start per node, base re-verified, fake QEMU | $start_large ms/start with a $hash_label base ($start_large4 ms/start for 4 nodes sharing it) | $start_tiny ms/start with a 16 MiB sparse base | +$start_cost ms per start for re-verification | reported | report |
| image verification, SHA-256 of $hash_label | $sha_go MB/s (in process) | $sha_sum MB/s (\`sha256sum\`) | ${sha_x}× | ≥ 0.9× | $(verdict "$sha_x" ">=" 0.9) |
| qcow2 header inspection | $inspect_us µs/op | $qemuimg_ms ms/op (\`qemu-img info --output=json\`) | ${header_x}× faster | ≥ 10× | $(verdict "$header_x" ">=" 10) |
| readiness detection latency | $ready_ms ms | — | — | < 1000 ms | $(verdict "$ready_ms" "<" 1000) |
| time to ready, 2-node lab (real QEMU, TCG) | $lab_wall s (\`barn-node apply\`, launch to both ready) | $lab_boot s (slowest guest's own boot) | ${lab_x}× | reported | $( [ "$lab_status" = ok ] && echo "report (TCG)" || echo "$lab_status") |

## How each row is measured

- **Inventory resolve.** The same file, \`lib/inventory/testdata/bench20.yml\`
  (20 managed hosts, groups, YAML anchors and merge keys). \`barn-inventory
  resolve -f\` and \`ansible-inventory -i FILE --list\` are run alternately,
  $runs times each, after one warm-up of each; wall time per process, median.
  The in-process row is \`BenchmarkResolve20\` (parse, validate, resolve to
  \`barn.spec/v1\`) against the same ansible-inventory median, so it shows the
  cost of the work without process start-up.
- **Plan.** \`BenchmarkPlan20\` (\`lib/plan\`): strict decoding of a 20-node
  \`barn.spec/v1\` plus \`Compute\` against a 20-node applied state in which one
  node's memory changed (the plan is \`recreate\`). Wall and process CPU time
  per plan.
- **Apply overhead.** \`BenchmarkApplyPerNode\` (\`barn-node/cli\`): the whole
  \`barn-node apply --no-wait\` in process — journal, qcow2 overlay
  (\`qemu-img\`), NoCloud seed ISO, invocation, launch to QMP identity, state
  commit — excluding guest boot, divided by the node count; nodes are
  prepared in parallel (bounded at 4). The fake QEMU answers QMP like QEMU;
  the real-QEMU row uses \`qemu-system-x86_64\` under TCG ($real_count
  repetitions of 2 iterations, 1 and 4 nodes only, to stay within the time
  budget).
- **No-op converge.** \`BenchmarkNoopApply3\` (\`barn-node/cli\`): \`barn-node
  apply --no-wait\` in process of a plan that changes nothing, against a
  running 3-node lab on the fake QEMU (locks, state reads, each running
  VM's identity proven over QMP); the median of 20 applies per repetition.
- **Launch.** \`BenchmarkLaunchFake\` (\`lib/vm\`): run the fake QEMU
  daemonized, wait for QMP identity, read the pidfile, capture and check the
  process tuple.
- **Start per node.** \`BenchmarkStartPerNode\` (\`barn-node/cli\`): the whole
  \`barn-node start --no-wait\` of stopped nodes in process on the fake QEMU
  (3 starts per repetition; the stop between them is not timed). Every start
  re-verifies the base image it boots from — size, SHA-256 and qcow2 header
  — once per command for a base several nodes share. With a fully allocated
  $hash_label qcow2 base the difference to the 16 MiB sparse base is the
  cost of that re-verification per start: hashing at about the verification
  rate above (hot page cache), so it scales with the base's size.
- **Image verification.** \`BenchmarkSHA256\` (\`lib/imagecache\`): one file of
  $hash_label of random bytes, hashed by Barn's in-process verifier and by
  coreutils \`sha256sum\` (which must agree), one pass each per repetition.
  The file is in the page cache for both (hot cache): this compares hashing,
  not disk reads.
- **Header inspection.** \`BenchmarkHeader\` (\`lib/qcow2\`): open a 20 GiB
  (virtual) qcow2, read its header and extensions, close; vs
  \`qemu-img info --output=json\` on the same file (a process per call).
- **Readiness detection.** \`BenchmarkReadinessDetection\` (\`lib/guest\`):
  a real local \`sshd\` stands in for the guest; the time from the ready
  marker being written to \`WaitReady\` returning (3 iterations per
  repetition). The probe interval is 500 ms, so the expected mean is about
  half of that plus one SSH round trip.
- **Time to ready.** A 2-node lab (\`meta\` and \`pg-test-1\`, 1 vCPU and
  768 MiB each, a persistent 1 GiB XFS data disk) booted exactly as
  \`testscripts/testdata/lab/lab_lifecycle.txtar\` does: a fresh network
  namespace, \`/etc/netns/NS/qemu\`, \`barn-net install\` inside it,
  \`BARN_NET_STATE\` and \`BARN_HOME\` in a temporary directory,
  \`BARN_ACCEL=tcg\`, the image repository built by
  \`scripts/build-image.sh\`. Barn's figure is the wall time of
  \`barn-inventory resolve | barn-plan\`'s plan applied by \`barn-node apply\`
  (image verification, overlays, seeds, launch, and waiting until both
  guests' ready markers are proven over SSH). The guest's own boot time is
  the kernel's uptime (the \`[ seconds ]\` prefix on the serial console,
  \`serial.log\`) when Barn's ready marker is written (\`barn-finalize:
  ready\`), else cloud-init's "finished … Up N seconds"; the slowest guest
  counts. Per node: ${lab_nodes:-n/a}.
  Barn's time minus the slowest guest's boot is ${lab_over} s: it includes firmware and bootloader time under TCG
  (before the kernel's clock starts), the host-side preparation, and
  readiness detection. One measurement, not a median (a lab boot takes a
  minute or two under TCG). Afterwards the lab is
  $cleanup_note.

$("$root/scripts/bench-startup.sh")

## Not measured here

- KVM: no lab was booted under KVM, so no figure above says how fast a
  lab boots on a workstation.
- Cold caches: the hashed file and the inventory are read from the page
  cache.
- Repeated lab boots: time to ready is one boot of one 2-node lab; under
  TCG it moves with the host's load far more than any host-side figure.
EOF
} >"$tmp_out"
if [ -n "$snap_section" ]; then
	printf '\n%s\n' "$snap_section" >>"$tmp_out"
elif [ -f "$out" ]; then
	awk '/^<!-- snapshot:begin/ {keep = 1} keep {print} /^<!-- snapshot:end/ {keep = 0}' "$out" >>"$tmp_out"
fi
# The arm64 section is measured by hand (an arm64 image build and lab take
# far longer than this run); keep it as it was written.
if [ -f "$out" ]; then
	awk '/^<!-- arm64:begin/ {keep = 1} keep {print} /^<!-- arm64:end/ {keep = 0}' "$out" >>"$tmp_out"
fi
mkdir -p "$(dirname "$out")"
mv "$tmp_out" "$out"
log "wrote $out"
echo "$out"
