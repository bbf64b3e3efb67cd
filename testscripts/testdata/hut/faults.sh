#!/bin/sh
# faults.sh — barn-net's network faults on Debian's own kernel, in one boot
# of the networkd image (TestKernelFaults). The CI host's kernel has no
# netem, so there a degrade can only be refused; Debian 12's kernel builds
# sch_netem as a module, loaded on demand by tc. /hut/hostnet.test is
# lib/hostnet's test binary: its live fault tests make their own network
# namespace, barn0, stand-in nodes and taps, and with BARN_REQUIRE_NETEM=1
# fail instead of passing on a refusal when the kernel cannot delay.
. /hut/lib.sh
uname -r > "$OUT/kernel"
cd /tmp || exit 1
export BARN_REQUIRE_NETEM=1
step faults /hut/hostnet.test -test.run '^TestLiveFaults' -test.v -test.count=1 -test.timeout 30m
