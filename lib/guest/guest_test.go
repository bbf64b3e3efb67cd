package guest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"barn.dev/lib/cidata"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/internal/testport"
	"barn.dev/lib/sshkeys"
)

const uuidA = "6f9619ff-8b86-d011-b42d-00c04fc964ff"
const uuidB = "0b7c4f2e-4a57-4d3c-9d0e-5f0a1a2b3c4d"

func TestArgsShape(t *testing.T) {
	tg := Target{Node: "meta", Port: 2222, User: "dba", VMUUID: uuidA}
	tg.Keys.PrivatePath, tg.Keys.KnownHosts = "/k/id_ed25519", "/k/known_hosts"
	got := strings.Join(execArgv(t, tg, []string{"echo", "a b"}), " ")
	want := "ssh -F /dev/null -o IdentityFile=/k/id_ed25519 -o BatchMode=yes -o IdentitiesOnly=yes -o StrictHostKeyChecking=accept-new -o LogLevel=ERROR -o UserKnownHostsFile=/k/known_hosts -o GlobalKnownHostsFile=none -o ConnectTimeout=30 -o HostKeyAlias=barn-"
	if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, " -p 2222 dba@127.0.0.1 -- 'echo' 'a b'") {
		t.Fatalf("argv = %s", got)
	}
	// as ssh reads it: Barn's known_hosts only, no system-wide one
	args, err := tg.Args(false)
	if err != nil {
		t.Fatal(err)
	}
	if g := sshG(t, args...); g["globalknownhostsfile"][0] != "none" || g["userknownhostsfile"][0] != "/k/known_hosts" || g["hostkeyalias"][0] != sshkeys.HostKeyAlias(uuidA) {
		t.Errorf("ssh -G of barn-node ssh's arguments: %v", g)
	}
	if sh := shellArgv(t, tg, nil, false); !contains(sh, "-t") {
		t.Errorf("interactive ssh lacks -t: %v", sh)
	}
	if sh := shellArgv(t, tg, []string{"echo", "$HOME"}, false); sh[len(sh)-1] != "echo $HOME" || contains(sh, "-t") {
		t.Errorf("ssh with a command: %v", sh)
	}
}

func contains(a []string, s string) bool {
	for _, x := range a {
		if x == s {
			return true
		}
	}
	return false
}

// TestExecAgainstRealSSHD: argument boundaries (spaces, empty strings,
// quotes, $, newlines) survive the remote shell; the exit status passes
// through unchanged, 37 and 255 included.
func TestExecAgainstRealSSHD(t *testing.T) {
	s := startSSHD(t)
	tg := s.target(uuidA)
	code, out, errs := run(t, execArgv(t, tg, []string{"sh", "-c", `for a in "$@"; do printf '[%s]' "$a"; done; exit 37`, "x", "a b", "", "it's", "$HOME", "l1\nl2", "*"}))
	if code != 37 {
		t.Fatalf("exit = %d, want 37 (stderr %s)", code, errs)
	}
	if want := "[a b][][it's][$HOME][l1\nl2][*]"; out != want {
		t.Fatalf("out = %q, want %q", out, want)
	}
	if code, _, _ := run(t, execArgv(t, tg, []string{"sh", "-c", "exit 255"})); code != 255 {
		t.Fatalf("exit = %d, want 255", code)
	}
	if code, _, _ := run(t, execArgv(t, tg, []string{"true"})); code != 0 {
		t.Fatalf("exit = %d, want 0", code)
	}
	// ssh NODE -- CMD uses remote shell semantics.
	if code, out, _ := run(t, shellArgv(t, tg, []string{"echo", "$((6*7))"}, false)); code != 0 || strings.TrimSpace(out) != "42" {
		t.Fatalf("shell: %d %q", code, out)
	}
}

// TestExecWithKeysUnderOddPath: a BARN_HOME with spaces, a comma, '#',
// quotes, '%'-tokens and non-ASCII text still reaches the real sshd with
// the deployment key, and the host key lands in Barn's known_hosts at
// exactly its path (an unquoted -o UserKnownHostsFile once split at the
// space and wrote a stray file outside BARN_HOME).
func TestExecWithKeysUnderOddPath(t *testing.T) {
	odd := `barn home,#1 'q' "d" 100%h %% é\x`
	s := startSSHDKeysAt(t, filepath.Join(odd, "keys"))
	cwd := t.TempDir()
	cmd := exec.Command("sh", "-c", `exec "$@"`, "sh")
	cmd.Args = append(cmd.Args, execArgv(t, s.target(uuidA), []string{"echo", "ok"})...)
	cmd.Dir = cwd
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("ssh with keys under %q: %v: %s", odd, err, out)
	}
	kh, err := os.ReadFile(s.keys.KnownHosts)
	if err != nil || !strings.HasPrefix(string(kh), sshkeys.HostKeyAlias(uuidA)+" ") {
		t.Fatalf("known_hosts at %s: %v %q", s.keys.KnownHosts, err, kh)
	}
	if ents, _ := os.ReadDir(cwd); len(ents) != 0 {
		t.Errorf("ssh wrote %d stray files into its working directory", len(ents))
	}
	if ents, _ := os.ReadDir(filepath.Dir(s.keys.KnownHosts)); len(ents) != 4 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("keys dir holds %q, want the key pair, keys.json and known_hosts", names)
	}
	for _, bad := range []string{"/tmp/${HOME}/k", "/tmp/a\nb/k"} {
		tg := s.target(uuidA)
		tg.Keys.PrivatePath = bad
		if _, err := ExecArgv(tg, []string{"true"}); exitcode.As(err) == nil || exitcode.As(err).Reason != "unrepresentable_value" {
			t.Errorf("key path %q: %v, want an unrepresentable_value refusal", bad, err)
		}
	}
}

// TestHostKeyTrustIsPerInstance: a changed key for the same VM instance is
// refused; a recreated VM (new UUID) on the same port is accepted.
func TestHostKeyTrustIsPerInstance(t *testing.T) {
	s := startSSHD(t)
	if code, _, errs := run(t, execArgv(t, s.target(uuidA), []string{"true"})); code != 0 {
		t.Fatalf("first connection: %d %s", code, errs)
	}
	kh, _ := os.ReadFile(s.keys.KnownHosts)
	if !strings.Contains(string(kh), "barn-") || strings.Contains(string(kh), "127.0.0.1") {
		t.Fatalf("known_hosts is not keyed by HostKeyAlias:\n%s", kh)
	}
	s.restartWithNewHostKey()
	code, _, errs := run(t, execArgv(t, s.target(uuidA), []string{"true"}))
	if code != 255 || PermanentSSHError(errs) != "host_key_mismatch" {
		t.Fatalf("swapped host key for the same instance: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := run(t, execArgv(t, s.target(uuidB), []string{"true"})); code != 0 {
		t.Fatalf("recreated instance on the same port refused: %d %s", code, errs)
	}
	// WaitReady fails fast (on its first probe, not after the timeout) on
	// the mismatch.
	noSecondProbe(t)
	_, err := WaitReady(context.Background(), s.target(uuidA), 60*time.Second)
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Integrity || e.Reason != "host_key_mismatch" {
		t.Fatalf("WaitReady err = %v", err)
	}
}

func withStateDir(t *testing.T) string {
	dir := t.TempDir()
	old := stateDir
	stateDir = dir
	t.Cleanup(func() { stateDir = old })
	return dir
}

func writeMarker(t *testing.T, dir, body string) {
	t.Helper()
	tmp := filepath.Join(dir, ".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "ready.json")); err != nil {
		t.Fatal(err)
	}
}

// onProbe installs f as the probe hook for the rest of the test.
func onProbe(t *testing.T, f func(probe int, last string)) {
	probed = f
	t.Cleanup(func() { probed = nil })
}

// TestWaitReadyAgainstRealSSHD: WaitReady keeps probing while the guest has
// no marker, then one of a previous generation, and returns on the probe
// that sees the expected one. The guest's markers are written between
// probes (the probe hook), so the probe count is exact.
func TestWaitReadyAgainstRealSSHD(t *testing.T) {
	s := startSSHD(t)
	dir := withStateDir(t)
	withProbeWait(t, 0)
	tg := s.target(uuidA)
	var seen []string
	onProbe(t, func(probe int, last string) {
		seen = append(seen, last)
		switch probe {
		case 1: // An old marker first (previous generation), then the right one.
			writeMarker(t, dir, `{"node":"meta","generation":0,"spec_hash":"abc","setup_version":"`+cidata.SetupVersion+`","warnings":[]}`)
		case 2:
			writeMarker(t, dir, `{"node":"meta","generation":1,"spec_hash":"abc","setup_version":"barn-setup/0","warnings":[{"stage":"hosts","detail":"boom"}],"repairs":["data: reset"],"disks":[{"name":"data","mount":"/data","filesystem":"xfs"}]}`)
		}
	})
	r, err := WaitReady(context.Background(), tg, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if r.Marker.Generation != 1 || len(r.Warnings) != 2 || r.Warnings[0].Stage != "hosts" || r.Warnings[1].Stage != "setup-update" {
		t.Fatalf("ready = %+v", r)
	}
	if len(r.Repairs) != 1 || r.Disks[0].Filesystem != "xfs" || r.Probes != 3 {
		t.Fatalf("ready = %+v", r)
	}
	if len(seen) != 2 || !strings.HasPrefix(seen[0], "guest setup has not finished") || !strings.Contains(seen[1], "generation 0") {
		t.Fatalf("probes saw %q, want pending, then the previous generation's marker", seen)
	}
}

// withProbeWait sets ProbeWait for the rest of the test.
func withProbeWait(t *testing.T, d time.Duration) {
	old := ProbeWait
	ProbeWait = d
	t.Cleanup(func() { ProbeWait = old })
}

// TestWaitReadyWaitsInTheGuest: a probe that finds no marker stays in the
// guest and returns the marker written while it waits: one SSH login, not
// one per PollInterval. The marker is written once the probe's loop is
// seen running (a process with the loop in its command line), so the
// probe count is exact.
func TestWaitReadyWaitsInTheGuest(t *testing.T) {
	s := startSSHD(t)
	dir := withStateDir(t)
	withProbeWait(t, 5*time.Minute)
	noSecondProbe(t)
	wrote := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(time.Minute)
		for !probeWaiting(dir) {
			if time.Now().After(deadline) {
				wrote <- errors.New("no probe loop seen waiting within a minute")
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		tmp := filepath.Join(dir, ".tmp")
		err := os.WriteFile(tmp, []byte(`{"node":"meta","generation":1,"spec_hash":"abc","setup_version":"`+cidata.SetupVersion+`","warnings":[]}`), 0o644)
		if err == nil {
			err = os.Rename(tmp, filepath.Join(dir, "ready.json"))
		}
		wrote <- err
	}()
	r, err := WaitReady(context.Background(), s.target(uuidA), 5*time.Minute)
	if werr := <-wrote; werr != nil {
		t.Fatal(werr)
	}
	if err != nil || r.Probes != 1 || r.Marker.Generation != 1 {
		t.Fatalf("WaitReady = %+v, %v; want the marker on the first probe", r, err)
	}
}

// probeWaiting reports whether a probe's loop for dir is running: a
// process whose command line holds the probe's marker path and its loop.
func probeWaiting(dir string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), dir+"/ready.json") && strings.Contains(string(b), "while :") {
			return true
		}
	}
	return false
}

// noSecondProbe fails the test if WaitReady probes more than once.
func noSecondProbe(t *testing.T) {
	onProbe(t, func(probe int, last string) {
		t.Errorf("probe %d did not end the wait (%s); want the first one to", probe, last)
	})
}

func TestWaitReadyFailsFastOnBootstrapError(t *testing.T) {
	s := startSSHD(t)
	dir := withStateDir(t)
	if err := os.WriteFile(filepath.Join(dir, "error.json"), []byte(`{"exit_status":1,"stage":"identity","detail":"login user dba has shell /bin/sh; want /bin/bash"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	noSecondProbe(t)
	_, err := WaitReady(context.Background(), s.target(uuidA), time.Minute)
	e := exitcode.As(err)
	if e == nil || e.Reason != "guest_setup_failed" || !strings.Contains(e.Message, "during identity: login user dba has shell") || e.Next != "barn-node logs meta" {
		t.Fatalf("err = %#v", err)
	}
}

func TestWaitReadyTimeoutNamesLastError(t *testing.T) {
	s := startSSHD(t)
	withStateDir(t)
	tg := s.target(uuidA)
	tg.Port = testport.Free(t) // nothing listens
	_, err := WaitReady(context.Background(), tg, 2*time.Second)
	e := exitcode.As(err)
	if e == nil || e.Reason != "readiness_timeout" || !strings.Contains(strings.ToLower(e.Message), "connection refused") {
		t.Fatalf("err = %v", err)
	}
}

// TestWaitReadyCancelled: cancelling the context between probes ends the
// wait as cancelled (not as a timeout).
func TestWaitReadyCancelled(t *testing.T) {
	s := startSSHD(t)
	withStateDir(t)
	withProbeWait(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	onProbe(t, func(int, string) { cancel() })
	_, err := WaitReady(ctx, s.target(uuidA), time.Minute)
	if exitcode.ClassOf(err) != exitcode.Cancelled {
		t.Fatalf("err = %v", err)
	}
}

// BenchmarkReadinessDetection measures the time from the guest writing its
// ready marker to WaitReady returning (target: under 1 s).
func BenchmarkReadinessDetection(b *testing.B) {
	s := startSSHD(b)
	dir := b.TempDir()
	old := stateDir
	stateDir = dir
	defer func() { stateDir = old }()
	tg := s.target(uuidA)
	var total time.Duration
	for i := 0; i < b.N; i++ {
		_ = os.Remove(filepath.Join(dir, "ready.json"))
		wrote := make(chan time.Time, 1)
		go func() {
			time.Sleep(700 * time.Millisecond)
			wrote <- time.Now()
			_ = os.WriteFile(filepath.Join(dir, "ready.json"), []byte(`{"node":"meta","generation":1,"spec_hash":"abc","setup_version":"`+cidata.SetupVersion+`","warnings":[]}`), 0o644)
		}()
		if _, err := WaitReady(context.Background(), tg, time.Minute); err != nil {
			b.Fatal(err)
		}
		total += time.Since(<-wrote)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-detect/op")
}
