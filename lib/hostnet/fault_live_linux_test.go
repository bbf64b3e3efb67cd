package hostnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"barn.dev/lib/exitcode"
)

// The fault tests run real nft and tc on a real bridge inside the test's
// own network namespace (live). Nodes are stand-ins: a network namespace
// per node (unshare --net, held by a shell the test owns) joined to barn0
// by a veth pair whose bridge end plays the tap; the degrade test adds a
// real tap held open by a process whose argv is a QEMU node's.

type fakeNode struct {
	name, addr, port string
	pid              int
}

// addNode creates node i (10.10.10.<i>) behind port n<i> on barn0.
func addNode(t *testing.T, i int) *fakeNode {
	t.Helper()
	cmd := exec.Command("unshare", "--net", "sh", "-c", "read x")
	stdin, err := cmd.StdinPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	n := &fakeNode{name: fmt.Sprintf("node%d", i), addr: fmt.Sprintf("10.10.10.%d", i), port: fmt.Sprintf("n%d", i), pid: cmd.Process.Pid}
	pid := strconv.Itoa(n.pid)
	// the namespace exists once the child's ns/net differs from ours
	self, _ := os.Stat("/proc/self/ns/net")
	for deadline := time.Now().Add(5 * time.Second); ; {
		if fi, err := os.Stat("/proc/" + pid + "/ns/net"); err == nil && !os.SameFile(fi, self) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("unshare --net did not enter a new namespace")
		}
		time.Sleep(10 * time.Millisecond)
	}
	sh(t, "ip", "link", "add", n.port, "type", "veth", "peer", "name", n.port+"p")
	sh(t, "ip", "link", "set", n.port+"p", "netns", pid)
	sh(t, "ip", "link", "set", n.port, "master", "barn0", "up")
	sh(t, "nsenter", "--net=/proc/"+pid+"/ns/net", "ip", "addr", "add", n.addr+"/24", "dev", n.port+"p")
	sh(t, "nsenter", "--net=/proc/"+pid+"/ns/net", "ip", "link", "set", n.port+"p", "up")
	return n
}

// ping reports whether one echo from the node (nil: the host) to addr is
// answered within a second (ping's own deadline, not a sleep).
func ping(n *fakeNode, addr string) (bool, time.Duration) {
	argv := []string{"ping", "-n", "-c", "1", "-W", "1", addr}
	if n != nil {
		argv = append([]string{"nsenter", "--net=/proc/" + strconv.Itoa(n.pid) + "/ns/net"}, argv...)
	}
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return false, 0
	}
	m := regexp.MustCompile(`time=([0-9.]+) ms`).FindSubmatch(out)
	if m == nil {
		return true, 0
	}
	ms, _ := strconv.ParseFloat(string(m[1]), 64)
	return true, time.Duration(ms * float64(time.Millisecond))
}

// reach is the reachability matrix of nodes (and the host, "host"), as
// "a>b" for every ordered pair that answers.
func reach(t *testing.T, nodes ...*fakeNode) string {
	t.Helper()
	var ok []string
	for _, a := range append([]*fakeNode{nil}, nodes...) {
		for _, b := range append([]*fakeNode{nil}, nodes...) {
			if a == b {
				continue
			}
			from, to, addr := "host", "host", "10.10.10.1"
			if a != nil {
				from = a.name
			}
			if b != nil {
				to, addr = b.name, b.addr
			}
			if r, _ := ping(a, addr); r {
				ok = append(ok, from+">"+to)
			}
		}
	}
	return strings.Join(ok, " ")
}

// wantReach waits, up to 30 s, for the reachability matrix of nodes to be
// want, and fails naming what (and the last matrix) when it is not. One
// lost echo must not decide (a fresh veth's first ARP exchange on a loaded
// host can take longer than ping's second); a pair a fault blocks never
// answers, so waiting cannot hide an extra one.
func wantReach(t *testing.T, what, want string, nodes ...*fakeNode) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := reach(t, nodes...)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s\nwant %s", what, got, want)
		}
		time.Sleep(100 * time.Millisecond) // a pause between polls, not a verdict
	}
}

func member(n *fakeNode) []Member { return []Member{{Name: n.name, Address: n.addr}} }

func nftRuleset(t *testing.T) string {
	out, err := exec.Command("nft", "list", "ruleset").CombinedOutput()
	must(t, err)
	return string(out)
}

func TestLiveFaultsPartitionIsolateHeal(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		h, ctx := faultHost(t, e)
		a, b, c := addNode(t, 11), addNode(t, 12), addNode(t, 13)
		all := "host>node11 host>node12 host>node13 node11>host node11>node12 node11>node13 node12>host node12>node11 node12>node13 node13>host node13>node11 node13>node12"
		wantReach(t, "before any fault", all, a, b, c)
		// A user's own table and a rule on another bridge family stay as they are.
		sh(t, "nft", "add table bridge user_t { chain c { type filter hook forward priority 10; policy accept; ip daddr 192.0.2.1 accept; }; }")
		user := nftRuleset(t)

		f1, err := h.AddFault(ctx, FaultRequest{Kind: FaultPartition, A: member(a), B: append(member(b), member(c)...)}, time.Now())
		must(t, err)
		wantReach(t, "partition node11 | node12,node13", "host>node11 host>node12 host>node13 node11>host node12>host node12>node13 node13>host node13>node12", a, b, c)
		f2, err := h.AddFault(ctx, FaultRequest{Kind: FaultIsolate, A: member(c)}, time.Now())
		must(t, err)
		wantReach(t, "partition + isolate node13", "host>node11 host>node12 node11>host node12>host", a, b, c)
		views, err := h.FaultViews(ctx, time.Now())
		must(t, err)
		if len(views) != 2 || !views[0].Enforced || !views[1].Enforced || views[1].Describe() != "isolate node13" {
			t.Fatalf("views %+v", views)
		}
		if _, err := h.HealFaults(ctx, []string{f1.ID}, false); err != nil {
			t.Fatal(err)
		}
		wantReach(t, "isolate node13 only", "host>node11 host>node12 node11>host node11>node12 node12>host node12>node11", a, b, c)
		if _, err := h.HealFaults(ctx, []string{"f9"}, false); exitcode.As(err).Reason != "fault_unknown" {
			t.Fatalf("heal of an unknown fault: %v", err)
		}
		if _, err := h.HealFaults(ctx, nil, true); err != nil {
			t.Fatal(err)
		}
		wantReach(t, "healed", all, a, b, c)
		if rs := nftRuleset(t); rs != user {
			t.Fatalf("after heal --all the ruleset is not the user's alone:\n%s\nwant:\n%s", rs, user)
		}
		if _, err := os.Stat(h.FaultsPath()); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("record left after healing every fault: %v", err)
		}
		_ = f2
	})
}

// faultHost installs the real network and returns its host with the real
// nft and tc.
func faultHost(t *testing.T, e *liveEnv) (*Host, context.Context) {
	t.Helper()
	for _, tool := range []string{"nft", "tc", "unshare", "nsenter", "ping"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("fault tests need %s (scripts/install-deps.sh): %v", tool, err)
		}
	}
	if _, err := install(t, e.host); err != nil {
		t.Fatalf("install: %v", err)
	}
	e.host.Runner = ExecRunner{}
	return e.host, context.Background()
}

func TestLiveFaultsOneWayAndForeignTable(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		h, ctx := faultHost(t, e)
		a, b := addNode(t, 11), addNode(t, 12)
		// One way: node11's packets to node12 are dropped, node12's to node11 pass
		// (so neither ping is answered); the host still reaches both.
		_, err := h.AddFault(ctx, FaultRequest{Kind: FaultPartition, A: member(a), B: member(b), OneWay: true}, time.Now())
		must(t, err)
		if rs := nftRuleset(t); strings.Count(rs, "ip saddr 10.10.10.11 ip daddr 10.10.10.12 drop") != 1 || strings.Contains(rs, "ip saddr 10.10.10.12") {
			t.Fatalf("one-way rules:\n%s", rs)
		}
		_, err = h.HealFaults(ctx, nil, true)
		must(t, err)
		// A table of Barn's name that Barn did not create is refused, untouched.
		sh(t, "nft", "add table bridge "+FaultTable("barn0"))
		before := nftRuleset(t)
		_, err = h.AddFault(ctx, FaultRequest{Kind: FaultIsolate, A: member(a)}, time.Now())
		if exitcode.As(err).Reason != "fault_table_foreign" {
			t.Fatalf("foreign table: %v", err)
		}
		if after := nftRuleset(t); after != before {
			t.Fatalf("foreign table changed:\n%s", after)
		}
		if r, _ := h.ReadFaults(); len(r.Faults) != 0 {
			t.Fatalf("a refused fault stays recorded: %+v", r.Faults)
		}
		// Bad members: the host's own address, an address off the /24.
		for _, m := range []Member{{"h", "10.10.10.1"}, {"x", "10.10.11.5"}} {
			if _, err := h.AddFault(ctx, FaultRequest{Kind: FaultIsolate, A: []Member{m}}, time.Now()); exitcode.As(err).Reason != "bad_fault" {
				t.Fatalf("isolate %v: %v", m, err)
			}
		}
	})
}

// startFakeQEMU opens tap NAME (a real tun device) and hands it to a
// process whose argv attaches the private NIC of addr to barn0, as a
// node's QEMU does; the tap lives as long as that process.
func startFakeQEMU(t *testing.T, name, addr string) {
	t.Helper()
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	must(t, err)
	ifr, err := unix.NewIfreq(name)
	must(t, err)
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	must(t, unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr))
	f := os.NewFile(uintptr(fd), "/dev/net/tun")
	mac := PrivateMAC(netip.MustParseAddr(addr))
	cmd := exec.Command("sh", "-c", "read x", "qemu-system-x86_64", "-netdev", "bridge,id=private,br=barn0,helper=/x",
		"-device", "virtio-net-pci,netdev=private,mac="+mac+",bus=pcie.0")
	cmd.ExtraFiles = []*os.File{f}
	stdin, err := cmd.StdinPipe()
	must(t, err)
	must(t, cmd.Start())
	f.Close()
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	sh(t, "ip", "link", "set", name, "master", "barn0", "up")
}

// netemSupported probes the kernel with a netem qdisc on a dummy link of
// the test's namespace. With BARN_REQUIRE_NETEM=1 (testscripts
// TestHostUnderTestNetworkd, on Debian's kernel) a kernel without it fails the
// test instead of leaving the degrade's effect unproven.
func netemSupported(t *testing.T) bool {
	sh(t, "ip", "link", "add", "probe0", "type", "veth", "peer", "name", "probe0p")
	defer exec.Command("ip", "link", "del", "probe0").Run()
	out, err := exec.Command("tc", "qdisc", "add", "dev", "probe0", "root", "netem", "delay", "1ms").CombinedOutput()
	if err != nil && os.Getenv("BARN_REQUIRE_NETEM") == "1" {
		t.Fatalf("BARN_REQUIRE_NETEM=1, and this kernel takes no netem qdisc: %v: %s", err, out)
	}
	return err == nil
}

func qdisc(t *testing.T, dev string) string {
	out, err := exec.Command("tc", "qdisc", "show", "dev", dev, "root").CombinedOutput()
	must(t, err)
	return strings.TrimSpace(string(out))
}

func TestLiveFaultsDegrade(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		h, ctx := faultHost(t, e)
		startFakeQEMU(t, "tapx", "10.10.10.20")
		tap, err := h.NodeTap("barn0", netip.MustParseAddr("10.10.10.20"))
		if err != nil || tap != "tapx" {
			t.Fatalf("NodeTap = %q, %v", tap, err)
		}
		if tap, err := h.NodeTap("barn0", netip.MustParseAddr("10.10.10.21")); err != nil || tap != "" {
			t.Fatalf("NodeTap of a node without QEMU = %q, %v", tap, err)
		}
		before := qdisc(t, "tapx")
		f, err := h.AddFault(ctx, FaultRequest{Kind: FaultDegrade, A: []Member{{"pg", "10.10.10.20"}},
			Netem: &Netem{DelayUS: 200000, JitterUS: 1000, LossPct: 0.5, Rate: "10mbit"}}, time.Now())
		if !netemSupported(t) {
			// This kernel cannot delay: the degrade is refused as such, and
			// neither the record nor the tap keeps anything of it.
			if e := exitcode.As(err); e.Reason != "faults_unsupported" || e.Class != exitcode.Capability {
				t.Fatalf("degrade without netem: %v", err)
			}
			if r, _ := h.ReadFaults(); len(r.Faults) != 0 || qdisc(t, "tapx") != before {
				t.Fatalf("a refused degrade left %+v / %s", r.Faults, qdisc(t, "tapx"))
			}
			t.Log("this kernel has no netem (CONFIG_NET_SCH_NETEM): the degrade's effect is unproven here")
			return
		}
		must(t, err)
		t.Logf("tapx after the degrade: %s", qdisc(t, "tapx"))
		if q := qdisc(t, "tapx"); !strings.HasPrefix(q, "qdisc netem "+FaultQdiscHandle+" root") || !strings.Contains(q, "delay 200ms  1ms") || !strings.Contains(q, "loss 0.5%") || !strings.Contains(q, "rate 10Mbit") {
			t.Fatalf("tapx qdisc: %s", q)
		}
		if _, err := h.AddFault(ctx, FaultRequest{Kind: FaultDegrade, A: []Member{{"pg", "10.10.10.20"}}, Netem: &Netem{DelayUS: 1}}, time.Now()); exitcode.As(err).Reason != "fault_conflict" {
			t.Fatalf("second degrade: %v", err)
		}
		// A stopped node cannot be degraded; nothing stays recorded.
		if _, err := h.AddFault(ctx, FaultRequest{Kind: FaultDegrade, A: []Member{{"off", "10.10.10.21"}}, Netem: &Netem{DelayUS: 1}}, time.Now()); exitcode.As(err).Reason != "fault_target_down" {
			t.Fatalf("degrade of a stopped node: %v", err)
		}
		_, err = h.HealFaults(ctx, []string{f.ID}, false)
		must(t, err)
		if q := qdisc(t, "tapx"); q != before {
			t.Fatalf("after heal: %q, want %q", q, before)
		}
		// A user's own root qdisc is neither replaced nor deleted.
		sh(t, "tc", "qdisc", "replace", "dev", "tapx", "root", "handle", "1:", "pfifo")
		user := qdisc(t, "tapx")
		if _, err := h.AddFault(ctx, FaultRequest{Kind: FaultDegrade, A: []Member{{"pg", "10.10.10.20"}}, Netem: &Netem{DelayUS: 1}}, time.Now()); exitcode.As(err).Reason != "fault_qdisc_foreign" {
			t.Fatalf("degrade over a user's qdisc: %v", err)
		}
		if q := qdisc(t, "tapx"); q != user {
			t.Fatalf("user's qdisc changed: %q", q)
		}
	})
}

func TestLiveFaultsNetemDelaysPing(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		h, ctx := faultHost(t, e)
		a, b := addNode(t, 11), addNode(t, 12)
		if !netemSupported(t) {
			t.Log("this kernel has no netem (CONFIG_NET_SCH_NETEM): the RTT effect is unproven here")
			if err := h.setNetem(ctx, a.port, &Netem{DelayUS: 200000}); exitcode.As(err).Reason != "faults_unsupported" {
				t.Fatalf("netem on a kernel without it: %v", err)
			}
			return
		}
		// The netem options Barn renders, on a node's bridge port: the RTT
		// between two nodes grows by the delay.
		must(t, h.setNetem(ctx, a.port, &Netem{DelayUS: 200000}))
		ok, rtt := ping(b, a.addr)
		if !ok || rtt < 200*time.Millisecond {
			t.Fatalf("ping node12 -> node11 through a 200ms netem: ok=%v rtt=%v", ok, rtt)
		}
		t.Logf("RTT node12 -> node11 with netem delay 200ms on node11's port: %v", rtt)
		must(t, h.clearNetem(ctx, a.port))
		if ok, rtt = ping(b, a.addr); !ok || rtt >= 200*time.Millisecond {
			t.Fatalf("after clearing: ok=%v rtt=%v", ok, rtt)
		}
		t.Logf("RTT after clearing: %v", rtt)
	})
}

// Crash at every durable step of an install and a heal: the next command
// (heal ID, as status says; or the next install) converges.
func TestLiveFaultsCrashAtEveryStep(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		h, ctx := faultHost(t, e)
		a, b := addNode(t, 11), addNode(t, 12)
		type crash struct{ step string }
		crashAt := func(step string, fn func()) {
			t.Helper()
			h.FaultHook = func(s string) {
				if s == step {
					panic(crash{s})
				}
			}
			defer func() {
				h.FaultHook = nil
				if r := recover(); r == nil {
					t.Fatalf("no crash at %s", step)
				} else if _, ok := r.(crash); !ok {
					panic(r)
				}
			}()
			fn()
		}
		req := FaultRequest{Kind: FaultPartition, A: member(a), B: member(b)}
		for _, step := range []string{"fault_recorded", "fault_converged"} {
			crashAt(step, func() { _, _ = h.AddFault(ctx, req, time.Now()) })
			v, err := h.FaultViews(ctx, time.Now())
			must(t, err)
			if len(v) != 1 || v[0].Enforced || v[0].Next != "barn-net fault heal "+v[0].ID {
				t.Fatalf("after a crash at %s: %+v", step, v)
			}
			_, err = h.HealFaults(ctx, []string{v[0].ID}, false)
			must(t, err)
			wantReach(t, "healed after a crash at "+step, "host>node11 host>node12 node11>host node11>node12 node12>host node12>node11", a, b)
			if r, _ := h.ReadFaults(); len(r.Faults) != 0 || strings.Contains(nftRuleset(t), FaultTable("barn0")) {
				t.Fatalf("left after a crash at %s: %+v\n%s", step, r.Faults, nftRuleset(t))
			}
		}
		// A crash after recording the install: the next install finishes it.
		crashAt("fault_recorded", func() { _, _ = h.AddFault(ctx, req, time.Now()) })
		_, err := h.AddFault(ctx, FaultRequest{Kind: FaultIsolate, A: []Member{{"n13", "10.10.10.13"}}}, time.Now())
		must(t, err)
		if v, _ := h.FaultViews(ctx, time.Now()); len(v) != 2 || !v[0].Enforced || !v[1].Enforced {
			t.Fatalf("converged by the next install: %+v", v)
		}
		r, _ := h.ReadFaults()
		part := r.Faults[0].ID // IDs restart when the record is gone
		for _, step := range []string{"heal_recorded", "fault_converged"} {
			crashAt(step, func() { _, _ = h.HealFaults(ctx, []string{part}, false) })
			if r, _ := h.ReadFaults(); len(r.Faults) != 2 || r.Faults[0].State != FaultHealing {
				t.Fatalf("after a crash at heal's %s: %+v", step, r.Faults)
			}
		}
		_, err = h.HealFaults(ctx, []string{part}, false)
		must(t, err)
		wantReach(t, "healed", "host>node11 host>node12 node11>host node11>node12 node12>host node12>node11", a, b)
		_, err = h.HealFaults(ctx, nil, true)
		must(t, err)
		if strings.Contains(nftRuleset(t), FaultTable("barn0")) {
			t.Fatal("table left after heal --all")
		}
		// Uninstall heals what the record holds before the bridge goes.
		_, err = h.AddFault(ctx, FaultRequest{Kind: FaultIsolate, A: member(a)}, time.Now())
		must(t, err)
		sh(t, "ip", "link", "del", a.port) // the nodes go first, as make uninstall does
		sh(t, "ip", "link", "del", b.port)
		if _, err := h.Uninstall(ctx, func(s string) { t.Log(s) }); err != nil {
			t.Fatalf("uninstall with a fault: %v", err)
		}
		if _, err := os.Stat(h.FaultsPath()); !errors.Is(err, os.ErrNotExist) || strings.Contains(nftRuleset(t), FaultTable("barn0")) {
			t.Fatalf("uninstall left the fault: %v\n%s", err, nftRuleset(t))
		}
	})
}

// Concurrent fault commands serialize on the fault lock: every one is
// recorded, each with its own ID, and the table holds all of them.
func TestLiveFaultsConcurrentInstalls(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		h, ctx := faultHost(t, e)
		h.RunDir = e.dir
		errs := make(chan error, 8)
		for i := range 8 {
			go func() {
				_, err := h.AddFault(ctx, FaultRequest{Kind: FaultIsolate, A: []Member{{"n", fmt.Sprintf("10.10.10.%d", 100+i)}}}, time.Now())
				errs <- err
			}()
		}
		for range 8 {
			must(t, <-errs)
		}
		v, err := h.FaultViews(ctx, time.Now())
		must(t, err)
		ids := map[string]bool{}
		for _, f := range v {
			if !f.Enforced {
				t.Errorf("%s not enforced: %s", f.ID, f.Problem)
			}
			ids[f.ID] = true
		}
		if len(v) != 8 || len(ids) != 8 {
			t.Fatalf("%d faults recorded, %d IDs: %+v", len(v), len(ids), v)
		}
		_, err = h.HealFaults(ctx, nil, true)
		must(t, err)
	})
}
