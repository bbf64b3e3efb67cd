#!/bin/sh
# bench-images.sh: image verification benchmarks for barn-repo.
#
#   SHA-256 of a 1 GiB image: Barn in process vs coreutils sha256sum, in the
#   same run (target: Barn >= 0.9x sha256sum's throughput);
#   qcow2 header inspection vs `qemu-img info` (target: >= 10x faster).
#
# Prints the median of COUNT runs (default 5) of each and the ratios.
# BARN_BENCH_BYTES overrides the hashed size (bytes, default 1 GiB).
set -eu
cd "$(dirname "$0")/../lib"
count=${COUNT:-5}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

go test -run '^$' -bench 'BenchmarkSHA256' -benchtime 1x -count "$count" ./imagecache >"$out"
go test -run '^$' -bench 'BenchmarkHeader' -count "$count" ./qcow2 >>"$out"

# median NAME COLUMN-SUFFIX: median of the value before "ns/op" or "MB/s".
median() {
	grep "^$1-" "$out" | awk -v unit="$2" '{for (i = 2; i <= NF; i++) if ($i == unit) print $(i-1)}' |
		sort -g | awk '{v[NR] = $1} END {if (NR == 0) {print "NaN"; exit} m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; print m}'
}

go_mbs=$(median BenchmarkSHA256/go MB/s)
sum_mbs=$(median BenchmarkSHA256/sha256sum MB/s)
ins_ns=$(median BenchmarkHeader/inspect ns/op)
qi_ns=$(median BenchmarkHeader/qemu-img-info ns/op)

awk -v g="$go_mbs" -v s="$sum_mbs" -v i="$ins_ns" -v q="$qi_ns" -v n="$count" 'BEGIN {
	printf "sha256 (median of %d): barn %.1f MB/s, sha256sum %.1f MB/s, ratio %.2fx (target >= 0.90x) %s\n", n, g, s, g / s, (g / s >= 0.9) ? "ok" : "BELOW TARGET"
	printf "header (median of %d): inspect %.0f ns, qemu-img info %.0f ns, speed-up %.0fx (target >= 10x) %s\n", n, i, q, q / i, (q / i >= 10) ? "ok" : "BELOW TARGET"
}'
