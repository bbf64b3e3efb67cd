package testscripts

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMakeCIRunsRaceDetector: `make ci`, the README's test command, runs
// the concurrency suites under the race detector (a dry run of make lists
// what it would execute).
func TestMakeCIRunsRaceDetector(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is not installed: ", err)
	}
	out, err := exec.Command("make", "-n", "-C", "..", "ci").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n ci: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "test -race") {
		t.Fatalf("make ci never runs go test -race:\n%s", out)
	}
	for _, pkg := range []string{"./state", "./lifecycle", "./cli"} {
		if !strings.Contains(string(out), pkg) {
			t.Errorf("make ci's race run omits %s", pkg)
		}
	}
}

// TestMakeCIRunsAnsibleSuites: `make ci` runs the Ansible cross-check and
// differential suites and the export's suites against real Ansible
// (lib/guest; test-units skips them) verbosely (their counts show) and requires Ansible
// for them (BARN_REQUIRE_ANSIBLE=1: a missing Ansible fails).
func TestMakeCIRunsAnsibleSuites(t *testing.T) {
	out, err := exec.Command("make", "-n", "-C", "..", "ci").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n ci: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "-v -run '^(TestAnsible|FuzzAnsible)' ./inventory ./guest ") {
		t.Fatalf("make ci does not run the Ansible suites:\n%s", out)
	}
	env, err := exec.Command("make", "-s", "-C", "..", "--eval", "print-require: ; @echo $$BARN_REQUIRE_ANSIBLE", "print-require").Output() // stderr: a parent make's jobserver warning
	if err != nil || strings.TrimSpace(string(env)) != "1" {
		t.Fatalf("make does not export BARN_REQUIRE_ANSIBLE=1: %q %v", env, err)
	}
}

// TestTestGuard: scripts/test-guard.sh, which runs every `make test` and
// `make race` pass, passes a command that leaves nothing behind and fails
// one that leaves a file in /tmp, naming it (and passes on its exit
// status).
func TestTestGuard(t *testing.T) {
	guard := "../scripts/test-guard.sh"
	if out, err := exec.Command(guard, "sh", "-c", "f=$(mktemp /tmp/guard-ok.XXXXXX) && rm $f").CombinedOutput(); err != nil {
		t.Fatalf("a clean command failed the guard: %v\n%s", err, out)
	}
	if os.Geteuid() == 0 {
		// barn entries of the host's /run (barn-net's locks) are leaks too
		run := "/run/barn-guard-leak-" + strings.ReplaceAll(t.Name(), "/", "_")
		t.Cleanup(func() { _ = os.Remove(run) })
		out, err := exec.Command(guard, "sh", "-c", "touch "+run).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "appeared in /run") || !strings.Contains(string(out), "barn-guard-leak-") {
			t.Fatalf("a file left in /run passed the guard: %v\n%s", err, out)
		}
	}
	leak := "/tmp/barn-guard-leak-" + strings.ReplaceAll(t.Name(), "/", "_")
	t.Cleanup(func() { _ = exec.Command("rm", "-f", leak).Run() }) // the non-root guard sees the real /tmp
	out, err := exec.Command(guard, "sh", "-c", "echo x > "+leak).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "barn-guard-leak-") {
		t.Fatalf("a command leaving %s passed the guard: %v\n%s", leak, err, out)
	}
	err = exec.Command(guard, "sh", "-c", "exit 3").Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("guard of a command exiting 3: %v", err)
	}
}

// TestMakeCIVetsForMacOS: macOS is a supported host, so `make ci` vets
// every module for darwin on both Mac CPUs (`make cross`).
func TestMakeCIVetsForMacOS(t *testing.T) {
	out, err := exec.Command("make", "-n", "-C", "..", "ci").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n ci: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "GOOS=darwin GOARCH=$a go vet ./lib/... ./barn-inventory/... ./barn-plan/... ./barn-node/... ./barn-net/... ./barn-repo/... ./barn-state/... ./testscripts/...") {
		t.Fatalf("make ci never vets for darwin:\n%s", out)
	}
}
