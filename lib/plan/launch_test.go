package plan

import (
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
	"barn.dev/lib/state"
)

var d12UEFI = imageref.Identity{Selector: "d12u:stable", Image: "d12u", Version: "12.13", Arch: "amd64",
	File: "images/d12u-12.13-amd64.qcow2", SizeBytes: 400 << 20, SHA256: "bb22", VirtualSize: 3 * gib,
	Boot: "uefi", SourceUser: "debian", Status: "supported"}

// TestMixedBootModesRefused: as in Barn 0.9, one deployment boots one way.
// A new node whose image boots otherwise than the kept nodes, or two new
// nodes of different boot modes, fail the plan with usage/boot_modes_mixed
// naming the nodes; a selected plan counts the unselected kept nodes too.
func TestMixedBootModesRefused(t *testing.T) {
	both := fakeResolver{"d12:stable/amd64": d12, "d12u:stable/amd64": d12UEFI}

	s := testSpec(2)
	s.Nodes[1].Image = "d12u:stable"
	s.Seal()
	_, err := Compute(Input{Desired: s, Resolver: both})
	e := wantClass(t, err, exitcode.Usage, "boot_modes_mixed")
	if !strings.Contains(e.Message, "bios (node-10) and uefi (node-11)") || e.Next == "" {
		t.Fatalf("message %q next %q", e.Message, e.Next)
	}

	// Kept bios nodes, a new uefi node planned alone: still refused.
	s1 := testSpec(1)
	dep, nodes := applied(s1, state.Running)
	s2 := testSpec(2)
	s2.Nodes[1].Image = "d12u:stable"
	s2.Seal()
	_, err = Compute(Input{Desired: s2, Applied: dep, Nodes: nodes, Resolver: both, Selected: []string{"node-11"}})
	wantClass(t, err, exitcode.Usage, "boot_modes_mixed")

	// One boot mode throughout is planned.
	s3 := testSpec(2)
	for i := range s3.Nodes {
		s3.Nodes[i].Image = "d12u:stable"
	}
	s3.Seal()
	if p := mustCompute(t, Input{Desired: s3, Resolver: both}); outcomes(p) != "node-10=create node-11=create" {
		t.Fatalf("outcomes = %s", outcomes(p))
	}
}

// TestUnlaunchableArchRefused: a guest architecture the host cannot run
// fails the plan with Launchable's error, annotated with the first node
// that would be launched; nodes that are only kept are not asked about.
func TestUnlaunchableArchRefused(t *testing.T) {
	arm := d12
	arm.Arch = "arm64"
	res := fakeResolver{"d12:stable/arm64": arm, "d12:stable/amd64": d12}
	onlyAMD64 := func(arch string) error {
		if arch != "amd64" {
			return exitcode.New(exitcode.Capability, "guest architecture %s cannot run here", arch).WithReason("guest_arch_unsupported")
		}
		return nil
	}
	s := testSpec(2)
	s.Deployment.Arch = "arm64"
	s.Seal()
	_, err := Compute(Input{Desired: s, Resolver: res, Launchable: onlyAMD64})
	e := wantClass(t, err, exitcode.Capability, "guest_arch_unsupported")
	if !strings.HasPrefix(e.Message, "node node-10: guest architecture arm64") {
		t.Fatalf("message %q", e.Message)
	}
	// Without a catalog the deployment's architecture is what is asked.
	_, err = Compute(Input{Desired: s, Launchable: onlyAMD64})
	wantClass(t, err, exitcode.Capability, "guest_arch_unsupported")

	// amd64 is launched; running nodes are not re-asked.
	asked := 0
	counting := func(arch string) error { asked++; return onlyAMD64(arch) }
	a := testSpec(2)
	mustCompute(t, Input{Desired: a, Resolver: res, Launchable: counting})
	if asked != 2 {
		t.Fatalf("asked %d times for two creates", asked)
	}
	dep, nodes := applied(a, state.Running)
	asked = 0
	mustCompute(t, Input{Desired: a, Applied: dep, Nodes: nodes, Resolver: res, Launchable: counting})
	if asked != 0 {
		t.Fatalf("asked %d times for two running nodes", asked)
	}
}
