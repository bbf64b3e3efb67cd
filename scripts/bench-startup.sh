#!/usr/bin/env bash
# bench-startup.sh — the start-up section of docs/BENCHMARKS.md (issue 19):
# each tool's `version` and `--help` as a process, next to `jq --version`
# measured in the same run, interleaved so all see the same load. Prints a
# Markdown section on stdout; `make bench` (scripts/bench.sh) includes it,
# and `scripts/bench-startup.sh --update` rewrites that section of
# docs/BENCHMARKS.md in place. Uses bin/ (run `make build` first).
#
#   BENCH_STARTUP_RUNS=N  runs per command (default 41); medians of N
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
runs=${BENCH_STARTUP_RUNS:-41}
tools=(barn-inventory barn-plan barn-node barn-net barn-repo barn-state)
work=$(mktemp -d /tmp/barn-bench-startup.XXXXXX)
trap 'rm -rf "$work"' EXIT

median() {
	sort -g | awk '{v[NR] = $1} END {if (NR == 0) {print "NaN"; exit}
		print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
# time_us FILE CMD...: run CMD once, append its wall time in µs to FILE.
time_us() {
	local f=$1 t0 t1; shift
	t0=$(date +%s%N); "$@" >/dev/null 2>&1 || true; t1=$(date +%s%N)
	echo $(( (t1 - t0) / 1000 )) >>"$f"
}
# init_bytes TOOL ARG: bytes allocated by package init (GODEBUG=inittrace=1).
init_bytes() {
	GODEBUG=inittrace=1 "$root/bin/$1" "$2" 2>&1 >/dev/null | awk '/^init /{b += $8} END {print b + 0}'
}

# init_ms TOOL ARG: milliseconds of package init (the sum of the clock
# times GODEBUG=inittrace=1 reports), appended to FILE.
init_ms() {
	GODEBUG=inittrace=1 "$root/bin/$2" "$3" 2>&1 >/dev/null | awk '/^init /{s += $5} END {printf "%.3f\n", s}' >>"$1"
}

command -v jq >/dev/null || { echo "bench-startup: jq is not installed" >&2; exit 3; }
for t in "${tools[@]}"; do [ -x "$root/bin/$t" ] || { echo "bench-startup: bin/$t missing: make build" >&2; exit 3; }; done
echo "bench-startup: ${#tools[@]} tools × version/--help vs jq --version, $runs runs each" >&2
for _ in $(seq "$runs"); do
	time_us "$work/jq" jq --version
	for t in "${tools[@]}"; do
		time_us "$work/$t-version" "$root/bin/$t" version
		time_us "$work/$t-help" "$root/bin/$t" --help
		init_ms "$work/$t-init-version" "$t" version
		init_ms "$work/$t-init-help" "$t" --help
	done
done
jq_us=$(median <"$work/jq")
ms() { awk "BEGIN {printf \"%.2f\", $1 / 1000}"; }
ratio() { awk "BEGIN {printf \"%.1f\", $1 / $jq_us}"; }

section() {
	echo "<!-- startup:begin (scripts/bench-startup.sh) -->"
	echo "## Start-up"
	echo
	echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') at revision \`$(git -C "$root" describe --always --dirty 2>/dev/null || echo dev)\`,"
	echo "load average $(cut -d' ' -f1-3 /proc/loadavg), $runs interleaved runs of each command, medians."
	echo "Every stage of a \`resolve | plan | apply\` pipe pays one start-up. \`jq --version\`"
	echo "($(jq --version)) is the peer: a small C program run the same way in the same loop."
	echo
	echo "| tool | \`version\` | \`--help\` | × \`jq --version\` ($(ms "$jq_us") ms) | package init \`version\` / \`--help\`, median (min) | init allocation (\`version\`) |"
	echo "| --- | --- | --- | --- | --- | --- |"
	for t in "${tools[@]}"; do
		v=$(median <"$work/$t-version"); h=$(median <"$work/$t-help")
		iv=$(median <"$work/$t-init-version"); ih=$(median <"$work/$t-init-help")
		nv=$(sort -g "$work/$t-init-version" | head -1); nh=$(sort -g "$work/$t-init-help" | head -1)
		echo "| $t | $(ms "$v") ms | $(ms "$h") ms | $(ratio "$v")× / $(ratio "$h")× | $iv ($nv) / $ih ($nh) ms | $(init_bytes "$t" version) bytes |"
	done
	echo
	echo "Package init is the sum of the clock times GODEBUG=inittrace=1 reports"
	echo "(median, and in parentheses the fastest run: the cost when no other"
	echo "process preempts it); the budget is at most 3 ms. It is enforced by"
	echo "\`testscripts\` \`TestStartupInitBudget\` through the bytes init allocates"
	echo "(GODEBUG=inittrace=1), which load does not change; wall-clock figures on"
	echo "this shared 2-core machine move with its load."
	echo "<!-- startup:end -->"
}

if [ "${1:-}" = --update ]; then
	doc="$root/docs/BENCHMARKS.md"
	section >"$work/section"
	awk -v sec="$work/section" '
		/^<!-- startup:begin/ {while ((getline l < sec) > 0) print l; skip = 1; done = 1; next}
		/^<!-- startup:end/ {skip = 0; next}
		!skip {print}
		END {if (!done) {print ""; while ((getline l < sec) > 0) print l}}' "$doc" >"$work/doc"
	mv "$work/doc" "$doc"
	echo "$doc"
else
	section
fi
