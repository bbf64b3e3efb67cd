package testscripts

import (
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
// differential suites verbosely (their counts show) and requires Ansible
// for them (BARN_REQUIRE_ANSIBLE=1: a missing Ansible fails).
func TestMakeCIRunsAnsibleSuites(t *testing.T) {
	out, err := exec.Command("make", "-n", "-C", "..", "ci").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n ci: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "-v -run '^(TestAnsible|FuzzAnsible)' ./inventory") {
		t.Fatalf("make ci does not run the Ansible suites:\n%s", out)
	}
	env, err := exec.Command("make", "-s", "-C", "..", "--eval", "print-require: ; @echo $$BARN_REQUIRE_ANSIBLE", "print-require").CombinedOutput()
	if err != nil || strings.TrimSpace(string(env)) != "1" {
		t.Fatalf("make does not export BARN_REQUIRE_ANSIBLE=1: %q %v", env, err)
	}
}

// TestMakeCIVetsForMacOS: macOS is a supported host, so `make ci` vets
// every module for darwin on both Mac CPUs (`make cross`).
func TestMakeCIVetsForMacOS(t *testing.T) {
	out, err := exec.Command("make", "-n", "-C", "..", "ci").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n ci: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "GOOS=darwin GOARCH=$a go vet ./...") {
		t.Fatalf("make ci never vets for darwin:\n%s", out)
	}
}
