package state

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"barn.dev/lib/fileid"
	"barn.dev/lib/imageref"
	"barn.dev/lib/spec"
	"barn.dev/lib/vmrecord"
)

// testSpec is a small valid, sealed spec with the given node names.
func testSpec(names ...string) spec.Spec {
	s := spec.Spec{
		Deployment: spec.Deployment{
			Name: spec.DeploymentName, Arch: "amd64", Image: "d12:stable",
			Subnet: spec.Subnet{CIDR: "10.10.10.0/24", Host: "10.10.10.1", Reserved: "10.10.10.2-10.10.10.8", Pool: "10.10.10.9-10.10.10.254"},
			User:   spec.User{Name: "dba", UID: 88},
		},
		Nodes:   []spec.Node{},
		Skipped: []spec.Skipped{},
	}
	for i, n := range names {
		s.Nodes = append(s.Nodes, spec.Node{
			Name: n, Address: "10.10.10." + string(rune('1'+i)) + "0", Image: "d12:stable", CPUs: 2,
			MemoryBytes: 4 << 30, RootDiskBytes: 64 << 30, Disks: []spec.Disk{}, Aliases: []string{}, Shares: []spec.Share{},
			MAC: spec.NICs{Management: "52:54:00:00:00:01", Private: "52:54:00:00:00:02"},
		})
	}
	if len(names) > 0 {
		s.Nodes[0].Control = true
		s.Control = names[0]
	}
	s.Seal()
	return s
}

// testRoot opens a fresh state root in a temporary directory.
func testRoot(t testing.TB) *Root {
	t.Helper()
	dir := t.TempDir()
	r, err := Open(envOf(map[string]string{"HOME": dir, "BARN_HOME": filepath.Join(dir, "barn"), "BARN_RUNTIME_DIR": filepath.Join(dir, "run")}))
	if err != nil {
		t.Fatal(err)
	}
	fixed := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	r.Now = func() time.Time { return fixed }
	return r
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// testNode is a valid committed, stopped node for r.
func testNode(r *Root, s spec.Spec, name string) *Node {
	sn := *s.Node(name)
	rt, _ := r.NodeRuntime(name)
	return &Node{
		Node: name, VMUUID: "0b5ad2d8-5f39-4b8e-9d7e-3c1f1d7c2a10", Phase: Stopped, Generation: 1,
		SpecHash: sn.SpecHash, Spec: sn,
		Image:    imageref.Identity{Selector: "d12:stable", Image: "d12", Version: "12.13", Arch: "amd64"},
		RootDisk: r.NodeFile(name, RootDiskName), Seed: r.NodeFile(name, SeedName), SerialLog: r.NodeFile(name, SerialLogName),
		DataDisks: []vmrecord.DataDisk{{Name: "data", Path: r.NodeFile(name, "data.qcow2"), Serial: "abcdefghijklmnopqrst",
			SizeBytes: 1 << 30, Mount: "/data", RequestedFilesystem: "auto"}},
		SSHPort: 2222, Accel: "tcg", Runtime: rt,
		Invocation: vmrecord.Invocation{Binary: "/usr/bin/qemu-system-x86_64", Args: []string{"-name", name}, InheritedFiles: []vmrecord.InheritedFile{}},
		Files:      map[string]fileid.ID{RootDiskName: testID(11), SeedName: testID(12), "data.qcow2": testID(13), SerialLogName: testID(14)},
	}
}

// testID is a recorded identity (the files it names need not exist).
func testID(inode uint64) fileid.ID { return fileid.ID{Device: 2049, Inode: inode} }

// testJournal is a valid, in-progress journal for node.
func testJournal(r *Root, node string) *Journal {
	return &Journal{
		OperationID: "6f1c1a52-31c4-4f44-a1e5-1d0c6f0e9a11", Node: node,
		VMUUID: "0b5ad2d8-5f39-4b8e-9d7e-3c1f1d7c2a10", SpecHash: testSpec(node).Nodes[0].SpecHash,
		Completed: []Artifact{{Kind: RootOverlay, Path: r.NodeFile(node, RootDiskName), ID: ptr(testID(11))}},
	}
}

func ptr[T any](v T) *T { return &v }

func writeRaw(t testing.TB, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
