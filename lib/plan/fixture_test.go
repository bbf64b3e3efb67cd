package plan

import (
	"fmt"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
	"barn.dev/lib/vmrecord"
)

const gib = int64(1) << 30

// testSpec returns a sealed spec of n nodes node-10, node-11, … at
// 10.10.10.10+i, the first one the control node, each 2 vCPU, 4 GiB, a
// 64 GiB root and the default 128 GiB /data disk.
func testSpec(n int) *spec.Spec {
	s := &spec.Spec{
		Schema: spec.Schema,
		Deployment: spec.Deployment{
			Name: spec.DeploymentName, Arch: "amd64", Image: "d12:stable",
			Subnet: spec.Subnet{CIDR: "10.10.10.0/24", Host: "10.10.10.1",
				Reserved: "10.10.10.2-10.10.10.8", Pool: "10.10.10.9-10.10.10.254"},
			User: spec.User{Name: "dba", UID: 88},
		},
		Skipped: []spec.Skipped{},
	}
	for i := range n {
		s.Nodes = append(s.Nodes, testNode(i))
	}
	s.Control = s.Nodes[0].Name
	s.Seal()
	return s
}

func testNode(i int) spec.Node {
	oct := 10 + i
	return spec.Node{
		Name:    fmt.Sprintf("node-%d", oct),
		Address: fmt.Sprintf("10.10.10.%d", oct),
		Control: i == 0,
		MAC: spec.NICs{Management: fmt.Sprintf("52:54:00:00:00:%02x", oct),
			Private: fmt.Sprintf("52:54:00:01:00:%02x", oct)},
		Image: "d12:stable", CPUs: 2, MemoryBytes: 4 * gib, RootDiskBytes: 64 * gib,
		Disks: []spec.Disk{{Name: "data", Mount: "/data", SizeBytes: 128 * gib, FS: "auto",
			Serial: "dataserialaaaaaaaa" + string(rune('a'+oct/26)) + string(rune('a'+oct%26))}},
		Aliases: []string{}, Shares: []spec.Share{},
	}
}

var d12 = imageref.Identity{Selector: "d12:stable", Image: "d12", Version: "12.13", Arch: "amd64",
	File: "images/d12-12.13-amd64.qcow2", SizeBytes: 400 << 20, SHA256: "aa11", VirtualSize: 3 * gib,
	Boot: "bios", SourceUser: "debian", Status: "supported"}

// applied returns the deployment state and committed node states that an
// apply of s would have left, every node in phase (running unless given).
func applied(s *spec.Spec, phase state.Phase) (*state.Deployment, map[string]*state.Node) {
	dep := &state.Deployment{Schema: state.DeploymentSchema, Generation: 3, SpecHash: s.SpecHash,
		Spec: *s, UpdatedAt: time.Unix(0, 0).UTC()}
	nodes := map[string]*state.Node{}
	for _, n := range s.Nodes {
		nodes[n.Name] = &state.Node{Schema: state.NodeSchema, Node: n.Name,
			VMUUID: "00000000-0000-4000-8000-0000000000" + n.Address[len(n.Address)-2:],
			Phase:  phase, Generation: 1, SpecHash: n.SpecHash, Spec: n, Image: d12, Accel: "tcg",
			DataDisks: []vmrecord.DataDisk{{Name: "data", Path: "/x/data.qcow2", SizeBytes: n.Disks[0].SizeBytes,
				Mount: "/data", Persistent: n.Disks[0].Persistent, RequestedFilesystem: "auto", ActualFilesystem: "xfs"}}}
	}
	return dep, nodes
}

// fakeResolver resolves from a map; unknown selectors are usage errors.
type fakeResolver map[string]imageref.Identity

func (f fakeResolver) Resolve(selector, arch string) (imageref.Identity, error) {
	id, ok := f[selector+"/"+arch]
	if !ok {
		return imageref.Identity{}, exitcode.New(exitcode.Usage, "unknown image %q", selector).WithReason("unknown_image")
	}
	return id, nil
}

type noCatalog struct{}

func (noCatalog) Resolve(string, string) (imageref.Identity, error) {
	return imageref.Identity{}, imageref.ErrNoCatalog
}

var catalog = fakeResolver{"d12:stable/amd64": d12}
