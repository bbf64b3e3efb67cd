package cli

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The probe is real sh, ping, getent, bash and date, run here in a network
// namespace of its own (unshare --net: only lo, so 192.0.2.1 is
// unreachable at once and nothing leaves this machine). Its output is
// what parseProbe reads.
func TestCheckProbeScriptRunsOnRealTools(t *testing.T) {
	for _, tool := range []string{"unshare", "ping", "getent", "bash", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the probe test needs %s: %v", tool, err)
		}
	}
	script := probeScript([]string{"127.0.0.1", "192.0.2.1"}, []string{"localhost", "barn-no-such-name.invalid"}, true, bannerBound(30*time.Second))
	if os.Geteuid() != 0 {
		t.Skip("the probe test needs root for its own network namespace (unshare --net)")
	}
	out, err := exec.Command("unshare", "--net", "sh", "-c", "ip link set lo up && "+script).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	r, err := parseProbe("n1", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !r.reach["127.0.0.1"] || r.reach["192.0.2.1"] {
		t.Fatalf("reach %v\n%s", r.reach, out)
	}
	if _, ok := r.ssh["192.0.2.1"]; !ok || r.ssh["192.0.2.1"] {
		t.Fatalf("ssh %v", r.ssh)
	}
	if r.resolve["localhost"] == "" || r.resolve["barn-no-such-name.invalid"] != "" {
		t.Fatalf("resolve %v", r.resolve)
	}
	if _, err := parseProbe("n1", []byte("surprise\n")); err == nil {
		t.Fatal("an unknown line was accepted")
	}
}

// A partition a | b,c shows in the matrix as exactly that cut, both ways,
// and fails the check; names and clocks stay green.
func TestCheckMatrixShowsExactlyTheCut(t *testing.T) {
	peers := []checkPeer{{"a", "10.0.0.1"}, {"b", "10.0.0.2"}, {"c", "10.0.0.3"}}
	want := map[string]string{"a": "10.0.0.1", "b": "10.0.0.2", "c": "10.0.0.3"}
	doc := CheckDoc{Nodes: []string{"a", "b", "c"}}
	cut := map[string]bool{"a 10.0.0.2": true, "a 10.0.0.3": true, "b 10.0.0.1": true, "c 10.0.0.1": true}
	for _, self := range peers {
		var lines []string
		for _, p := range peers {
			if p != self {
				v := "ok"
				if cut[self.name+" "+p.addr] {
					v = "fail"
				}
				lines = append(lines, "reach "+p.addr+" "+v)
			}
		}
		for n, addr := range want {
			lines = append(lines, "resolve "+n+" "+addr)
		}
		r, err := parseProbe(self.name, []byte(strings.Join(lines, "\n")))
		if err != nil {
			t.Fatal(err)
		}
		r.clock = ClockReading{UncertaintyMS: 1, RTTMS: 2, OK: true}
		r.peers, r.want = peers, want
		r.mergeInto(&doc)
	}
	doc.sort()
	doc.OK = doc.ok()
	var b bytes.Buffer
	if err := doc.RenderText(&b); err != nil {
		t.Fatal(err)
	}
	want1 := "from\\to a       b       c       \n" +
		"a       .       --      --      \n" +
		"b       --      .       ok      \n" +
		"c       --      ok      .       \n" +
		"CHECK FAILED\n"
	if b.String() != want1 {
		t.Fatalf("matrix:\n%s\nwant:\n%s", b.String(), want1)
	}
}

// The banner wait is half the session's bound, within 3-15 s: a peer that
// never answers fails its cell before the session's bound ends the row.
func TestCheckBannerBoundFitsTheSession(t *testing.T) {
	for _, c := range []struct {
		session time.Duration
		want    int
	}{{30 * time.Second, 15}, {20 * time.Second, 10}, {2 * time.Second, 3}, {5 * time.Minute, 15}} {
		if got := bannerBound(c.session); got != c.want {
			t.Errorf("bannerBound(%s) = %d, want %d", c.session, got, c.want)
		}
	}
}
