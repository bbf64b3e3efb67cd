package cli

import (
	"testing"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/inventory"
	"barn.dev/lib/plan"
)

// catalogJSON is a minimal catalog.json (schema 3) with d12 on the stable
// channel in both architectures, one version marked testing.
const catalogJSON = `{"schema":3,"revision":1,
"defaults":{"image":"d12","channel":"stable","arch":"native","boot":"bios"},
"images":{"d12":{"aliases":["debian12"],"boot":"bios","channels":{"stable":"12.13","next":"12.14"},
"versions":{
"12.13":{"status":"supported","provenance":"test","variants":{
 "amd64":{"file":"images/d12-12.13-amd64.qcow2","sha256":"1111111111111111111111111111111111111111111111111111111111111111","format":"qcow2","artifact_size":1048576,"virtual_size":3221225472,"source_user":"debian","boot":"bios","status":"supported","provenance":"test"},
 "arm64":{"file":"images/d12-12.13-arm64.qcow2","sha256":"2222222222222222222222222222222222222222222222222222222222222222","format":"qcow2","artifact_size":1048576,"virtual_size":3221225472,"source_user":"debian","boot":"uefi","status":"supported","provenance":"test"}}},
"12.14":{"status":"testing","provenance":"test","variants":{
 "amd64":{"file":"images/d12-12.14-amd64.qcow2","sha256":"3333333333333333333333333333333333333333333333333333333333333333","format":"qcow2","artifact_size":1048576,"virtual_size":3221225472,"source_user":"debian","boot":"bios","status":"testing","provenance":"test"}}}}}}}`

// TestPlanWithRealCatalog plans against the real lib/catalog resolver
// (the unit tests of lib/plan use a fake one): exact identities, the
// catalog's status warning, and an unknown selector as usage.
func TestPlanWithRealCatalog(t *testing.T) {
	c, err := catalog.DecodeCatalog([]byte(catalogJSON), "catalog.json")
	if err != nil {
		t.Fatalf("DecodeCatalog: %v", err)
	}
	inv := []byte("all:\n  hosts:\n    10.10.10.10: {}\n    10.10.10.11: { vm_image: 'd12:next' }\n  vars: { admin_ip: 10.10.10.10, vm_arch: amd64 }\n")
	s, _, err := inventory.Resolve(inv, "inv.yml")
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	p, err := plan.Compute(plan.Input{Desired: s, Resolver: c})
	if err != nil {
		t.Fatalf("Compute: %v", err)
	}
	if len(p.Images) != 2 {
		t.Fatalf("images = %+v", p.Images)
	}
	got := p.Nodes[0].Image
	if got == nil || got.Image != "d12" || got.Version != "12.13" || got.Arch != "amd64" ||
		got.SHA256 != "1111111111111111111111111111111111111111111111111111111111111111" || got.SizeBytes != 1048576 {
		t.Fatalf("node-10 image = %+v", got)
	}
	if p.Nodes[1].Image == nil || p.Nodes[1].Image.Version != "12.14" {
		t.Fatalf("node-11 image = %+v", p.Nodes[1].Image)
	}
	found := false
	for _, w := range p.Warnings {
		found = found || w.Code == "image_testing"
	}
	if !found {
		t.Fatalf("warnings = %+v, want image_testing", p.Warnings)
	}

	bad := []byte("all:\n  hosts:\n    10.10.10.10: { vm_image: u99 }\n  vars: { admin_ip: 10.10.10.10, vm_arch: amd64 }\n")
	s, _, err = inventory.Resolve(bad, "bad.yml")
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	_, err = plan.Compute(plan.Input{Desired: s, Resolver: c})
	if exitcode.ClassOf(err) != exitcode.Usage {
		t.Fatalf("unknown image selector: err = %v, want usage", err)
	}
}
