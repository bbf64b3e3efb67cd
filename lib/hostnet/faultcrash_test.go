package hostnet

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The fault transaction on fakes: nft and tc are scripts keeping the
// kernel's state in files (the table as last loaded, each tap's root
// qdisc), and a /proc fixture holds a node's QEMU with its tap. Unlike the
// live fault tests, this runs everywhere as root, degrade included (this
// CI kernel has no netem).

// withFaultFakes adds fake nft and tc to f and a /proc fixture in which a
// QEMU of 10.10.10.12 holds tap0.
func withFaultFakes(t *testing.T, f *fakeHost) {
	t.Helper()
	script := func(name, body string) {
		writeExecutable(t, filepath.Join(f.root, "bin", name), "#!/bin/sh\nF="+f.root+"/fake\n"+body)
	}
	script("nft", `case "$1" in
list) [ -e $F/nft ] || { echo "Error: No such file or directory" >&2; exit 1; }; cat $F/nft ;;
-f) if grep -q '{' "$2"; then cp "$2" $F/nft; else rm -f $F/nft; fi ;;
esac
`)
	script("tc", `q=$F/qdisc-$4
case "$2" in
show) if [ -e $q ]; then cat $q; else echo "qdisc noqueue 0: root refcnt 2"; fi ;;
replace) shift 9; echo "qdisc netem ba4e: root refcnt 2 limit 1000 $*" > $q ;;
del) rm -f $q ;;
esac
`)
	proc := filepath.Join(f.root, "proc")
	pid := filepath.Join(proc, "4242")
	must(t, os.MkdirAll(filepath.Join(pid, "fd"), 0o755))
	must(t, os.MkdirAll(filepath.Join(pid, "fdinfo"), 0o755))
	argv := []string{"qemu-system-x86_64", "-netdev", "bridge,id=private,br=barn0,helper=/x", "-device", "virtio-net-pci,netdev=private,mac=" + PrivateMAC(netip.MustParseAddr("10.10.10.12"))}
	must(t, os.WriteFile(filepath.Join(pid, "cmdline"), []byte(strings.Join(argv, "\x00")+"\x00"), 0o644))
	must(t, os.Symlink("/dev/net/tun", filepath.Join(pid, "fd", "9")))
	must(t, os.WriteFile(filepath.Join(pid, "fdinfo", "9"), []byte("pos:\t0\nflags:\t02\niff:\ttap0\n"), 0o644))
	f.ProcDir = proc
}

// TestFaultCrashAtEveryStepFollowsHints kills barn-net (the FaultHook
// seam) after every durable step of an install and of a heal, for every
// kind of fault, then follows the hint barn-net fault list prints, hint by
// hint, until the host is exactly as before the fault: no record, no
// table, the tap's default qdisc.
func TestFaultCrashAtEveryStepFollowsHints(t *testing.T) {
	a, b, c := Member{"pg-1", "10.10.10.11"}, Member{"pg-2", "10.10.10.12"}, Member{"pg-3", "10.10.10.13"}
	reqs := map[string]FaultRequest{
		"isolate":   {Kind: FaultIsolate, A: []Member{b}},
		"partition": {Kind: FaultPartition, A: []Member{a}, B: []Member{b, c}},
		"one-way":   {Kind: FaultPartition, A: []Member{a}, B: []Member{b}, OneWay: true},
		"degrade":   {Kind: FaultDegrade, A: []Member{b}, Netem: &Netem{DelayUS: 200000, LossPct: 1}},
	}
	steps := []struct{ phase, step string }{
		{"inject", "fault_recorded"}, {"inject", "fault_converged"},
		{"heal", "heal_recorded"}, {"heal", "fault_converged"},
	}
	for name, req := range reqs {
		for _, s := range steps {
			t.Run(name+"/"+s.phase+"/"+s.step, func(t *testing.T) {
				t.Parallel()
				f := newFakeHost(t, true, "inactive")
				if _, err := f.install(t, Options{}); err != nil {
					t.Fatal(err)
				}
				withFaultFakes(t, f)
				ctx := context.Background()
				_, err := f.HealFaults(ctx, nil, true) // nothing recorded: only the lock file appears
				must(t, err)
				before := f.snapshot(t)
				var id string
				if s.phase == "heal" {
					fault, err := f.AddFault(ctx, req, time.Now())
					must(t, err)
					if f.snapshot(t) == before {
						t.Fatal("the injected fault changed nothing")
					}
					id = fault.ID
				}
				hit := crashAt(f.Host, s.step, func() {
					if s.phase == "inject" {
						_, _ = f.AddFault(ctx, req, time.Now())
					} else {
						_, _ = f.HealFaults(ctx, []string{id}, false)
					}
				})
				if !hit {
					t.Fatalf("no crash point at %s", s.step)
				}
				followFaultHints(t, f.Host)
				if after := f.snapshot(t); after != before {
					t.Fatalf("after a crash at %s/%s and its hints the host differs:\n%s\nwant\n%s", s.phase, s.step, after, before)
				}
			})
		}
	}
}

// crashAt runs fn with a crash (a panic unwinding barn-net) armed at step.
func crashAt(h *Host, step string, fn func()) (hit bool) {
	type crash struct{}
	h.FaultHook = func(s string) {
		if s == step {
			panic(crash{})
		}
	}
	defer func() {
		h.FaultHook = nil
		if r := recover(); r != nil {
			if _, ok := r.(crash); !ok {
				panic(r)
			}
			hit = true
		}
	}()
	fn()
	return false
}

// followFaultHints runs what `barn-net fault list` names as next for each
// fault not enforced (only `barn-net fault heal ID`), until it names none;
// a fault still recorded then was enforced after all and is a failure.
func followFaultHints(t *testing.T, h *Host) {
	t.Helper()
	for range 5 {
		views, err := h.FaultViews(context.Background(), time.Now())
		must(t, err)
		followed := false
		for _, v := range views {
			id, ok := strings.CutPrefix(v.Next, "barn-net fault heal ")
			if v.Next != "" && !ok {
				t.Fatalf("hint %q for %s is not a heal", v.Next, v.ID)
			}
			if ok {
				_, err := h.HealFaults(context.Background(), []string{id}, false)
				must(t, err)
				followed = true
			}
		}
		if !followed {
			if len(views) > 0 {
				t.Fatalf("faults left without a hint: %+v", views)
			}
			return
		}
	}
	t.Fatal("the hints did not converge in 5 rounds")
}
