package state

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/vmrecord"
)

func TestDeploymentRoundTrip(t *testing.T) {
	r := testRoot(t)
	if d, err := r.ReadDeployment(); d != nil || err != nil {
		t.Fatalf("ReadDeployment before write = %v, %v", d, err)
	}
	d := &Deployment{Generation: 1, Spec: testSpec("pg-1", "pg-2")}
	if err := r.WriteDeployment(d); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(r.DeploymentFile())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state.json mode = %v, %v; want 0600", fi.Mode(), err)
	}
	got, err := r.ReadDeployment()
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != 1 || got.SpecHash != d.Spec.SpecHash || got.Schema != DeploymentSchema || len(got.Spec.Nodes) != 2 {
		t.Fatalf("read back %+v", got)
	}
	if !got.UpdatedAt.Equal(r.now()) {
		t.Fatalf("updated_at = %v, want %v", got.UpdatedAt, r.now())
	}
}

func TestWriteRefusesInvalid(t *testing.T) {
	r := testRoot(t)
	err := r.WriteDeployment(&Deployment{Generation: 0, Spec: testSpec("a")})
	wantClass(t, err, exitcode.Runtime, "generation is 0")
	n := testNode(r, testSpec("a"), "a")
	n.VMUUID = "not-a-uuid"
	wantClass(t, r.WriteNode(n), exitcode.Runtime, "vm_uuid")
	if _, err := os.Lstat(r.NodeFile("a", NodeStateName)); !os.IsNotExist(err) {
		t.Fatalf("invalid node state was written: %v", err)
	}
}

// mutateJSON rewrites the JSON document at path through f on generic
// values and writes it back with mode 0600.
func mutateJSON(t *testing.T, path string, f func(m map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	writeRaw(t, path, string(out), 0o600)
}

func TestDeploymentRejections(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, path string)
		substr string
	}{
		{"unknown field", func(t *testing.T, p string) { mutateJSON(t, p, func(m map[string]any) { m["extra"] = 1 }) }, `unknown field "extra"`},
		{"trailing bytes", func(t *testing.T, p string) {
			data, _ := os.ReadFile(p)
			writeRaw(t, p, string(data)+"{}", 0o600)
		}, "trailing data"},
		{"newer schema", func(t *testing.T, p string) {
			mutateJSON(t, p, func(m map[string]any) { m["schema"] = "barn.state.deployment/v2" })
		}, "written by a newer Barn"},
		{"other schema", func(t *testing.T, p string) {
			mutateJSON(t, p, func(m map[string]any) { m["schema"] = "barn.state.node/v1" })
		}, `has schema "barn.state.node/v1"`},
		{"no schema", func(t *testing.T, p string) { mutateJSON(t, p, func(m map[string]any) { delete(m, "schema") }) }, "no schema field"},
		{"hash mismatch", func(t *testing.T, p string) {
			mutateJSON(t, p, func(m map[string]any) {
				m["spec"].(map[string]any)["nodes"].([]any)[0].(map[string]any)["cpus"] = 64
			})
		}, "does not match the stored spec"},
		{"stored hash edited", func(t *testing.T, p string) {
			mutateJSON(t, p, func(m map[string]any) { m["spec_hash"] = strings.Repeat("0", 64) })
		}, "does not match the stored spec"},
		{"zero generation", func(t *testing.T, p string) { mutateJSON(t, p, func(m map[string]any) { m["generation"] = 0 }) }, "generation is 0"},
		{"wrong mode", func(t *testing.T, p string) {
			if err := os.Chmod(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "has mode 0644, want 0600"},
		{"symlink", func(t *testing.T, p string) {
			target := p + ".real"
			if err := os.Rename(p, target); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}, "is a symlink"},
		{"directory", func(t *testing.T, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"empty", func(t *testing.T, p string) { writeRaw(t, p, "", 0o600) }, "is empty"},
		{"truncated", func(t *testing.T, p string) {
			data, _ := os.ReadFile(p)
			writeRaw(t, p, string(data[:len(data)/2]), 0o600)
		}, "invalid barn.state.deployment/v1 document"},
		{"wrong type", func(t *testing.T, p string) {
			mutateJSON(t, p, func(m map[string]any) { m["generation"] = "one" })
		}, "line 1, column"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := testRoot(t)
			if err := r.WriteDeployment(&Deployment{Generation: 3, Spec: testSpec("pg-1", "pg-2")}); err != nil {
				t.Fatal(err)
			}
			c.damage(t, r.DeploymentFile())
			d, err := r.ReadDeployment()
			if d != nil {
				t.Fatal("damaged deployment was returned")
			}
			wantClass(t, err, exitcode.Integrity, c.substr)
			if !strings.Contains(err.Error(), r.DeploymentFile()) {
				t.Fatalf("error does not name the file: %v", err)
			}
			if p, ok := exitcode.As(err).Detail.(Problem); !ok || p.File != r.DeploymentFile() {
				t.Fatalf("detail = %#v, want a Problem naming the file", exitcode.As(err).Detail)
			}
		})
	}
}

func TestForeignOwnedDocument(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown a file to another user")
	}
	r := testRoot(t)
	if err := r.WriteDeployment(&Deployment{Generation: 1, Spec: testSpec("a")}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(r.DeploymentFile(), 4242, 4242); err != nil {
		t.Fatal(err)
	}
	_, err := r.ReadDeployment()
	wantClass(t, err, exitcode.Integrity, "owned by uid 4242")
}

func TestNodeRoundTripAndRejections(t *testing.T) {
	r := testRoot(t)
	s := testSpec("pg-1")
	n := testNode(r, s, "pg-1")
	if err := r.WriteNode(n); err != nil {
		t.Fatal(err)
	}
	got, err := r.ReadNode("pg-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.VMUUID != n.VMUUID || got.Phase != Stopped || got.Runtime != n.Runtime || got.DataDisks[0].Path != n.DataDisks[0].Path {
		t.Fatalf("read back %+v", got)
	}
	names, err := r.NodeNames()
	if err != nil || len(names) != 1 || names[0] != "pg-1" {
		t.Fatalf("NodeNames = %v, %v", names, err)
	}
	if n, err := r.ReadNode("pg-9"); n != nil || err != nil {
		t.Fatalf("ReadNode(missing) = %v, %v", n, err)
	}

	cases := []struct {
		name   string
		f      func(m map[string]any)
		substr string
	}{
		{"bad phase", func(m map[string]any) { m["phase"] = "flying" }, `phase "flying"`},
		{"bad uuid", func(m map[string]any) { m["vm_uuid"] = "xyz" }, "vm_uuid"},
		{"other node", func(m map[string]any) { m["node"] = "pg-2" }, "directory of node"},
		{"root disk elsewhere", func(m map[string]any) { m["root_disk"] = "/etc/passwd" }, "root_disk"},
		{"data disk outside", func(m map[string]any) {
			m["data_disks"].([]any)[0].(map[string]any)["path"] = "/tmp/data.qcow2"
		}, "data_disks[0].path"},
		{"running without process", func(m map[string]any) { m["phase"] = "running" }, "no process identity"},
		{"process while stopped", func(m map[string]any) {
			m["process"] = map[string]any{"pid": 1, "executable": "x", "started": "procstat:1", "argv_hash": "x", "boot": "b"}
		}, "process is recorded for phase stopped"},
		{"long socket", func(m map[string]any) {
			d := "/" + strings.Repeat("d", 100)
			m["runtime"] = map[string]any{"directory": d, "qmp": d + "/qmp.sock", "pidfile": d + "/qemu.pid"}
		}, "bytes; unix sockets allow at most 107"},
		{"long barn socket", func(m map[string]any) {
			d := "/" + strings.Repeat("d", 95)
			m["runtime"] = map[string]any{"directory": d, "qmp": d + "/qmp.sock", "barn_qmp": d + "/barn-qmp.sock", "pidfile": d + "/qemu.pid"}
		}, "barn-qmp.sock is 110 bytes; unix sockets allow at most 107"},
		{"barn monitor elsewhere", func(m map[string]any) { m["runtime"].(map[string]any)["barn_qmp"] = "/tmp/x.sock" }, "runtime.barn_qmp"},
		{"no barn monitor (a development build's)", func(m map[string]any) { delete(m["runtime"].(map[string]any), "barn_qmp") }, "runtime.barn_qmp"},
		{"unknown nested field", func(m map[string]any) { m["runtime"].(map[string]any)["extra"] = true }, `unknown field "extra"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := r.WriteNode(testNode(r, s, "pg-1")); err != nil {
				t.Fatal(err)
			}
			mutateJSON(t, r.NodeFile("pg-1", NodeStateName), c.f)
			_, err := r.ReadNode("pg-1")
			wantClass(t, err, exitcode.Integrity, c.substr)
			if !strings.Contains(err.Error(), r.NodeFile("pg-1", NodeStateName)) {
				t.Fatalf("error does not name the file: %v", err)
			}
		})
	}
}

func TestJournalRejections(t *testing.T) {
	r := testRoot(t)
	node := "pg-1"
	j := testJournal(r, node)
	if err := r.WriteJournal(j); err != nil {
		t.Fatal(err)
	}
	got, err := r.ReadJournal(node)
	if err != nil || len(got.Completed) != 1 || got.Prepared {
		t.Fatalf("ReadJournal = %+v, %v", got, err)
	}
	dir := r.NodeDir(node)
	art := func(kind, path string) map[string]any { return map[string]any{"kind": kind, "path": path} }
	cases := []struct {
		name   string
		f      func(m map[string]any)
		substr string
	}{
		{"path outside node dir", func(m map[string]any) {
			m["completed"] = []any{art("root-overlay", "/etc/root.qcow2")}
		}, "outside the node directory"},
		{"path in a subdirectory", func(m map[string]any) {
			m["completed"] = []any{art("root-overlay", dir+"/sub/root.qcow2")}
		}, "outside the node directory"},
		{"dot-dot path", func(m map[string]any) {
			m["completed"] = []any{art("root-overlay", dir+"/../pg-2/root.qcow2")}
		}, "not a clean absolute path"},
		{"relative path", func(m map[string]any) { m["completed"] = []any{art("seed", "seed.iso")} }, "not a clean absolute path"},
		{"duplicate artifact", func(m map[string]any) {
			m["completed"] = []any{art("root-overlay", dir+"/root.qcow2"), art("root-overlay", dir+"/root.qcow2")}
		}, "is a duplicate"},
		{"kind not in allowlist", func(m map[string]any) { m["completed"] = []any{art("state", dir+"/state.json")} }, "not in the allowlist"},
		{"kind/path mismatch", func(m map[string]any) { m["completed"] = []any{art("seed", dir+"/root.qcow2")} }, "a seed artifact must be seed.iso"},
		{"data disk named root", func(m map[string]any) { m["completed"] = []any{art("data-disk", dir+"/root.qcow2")} }, "data-disk artifact"},
		{"data disk bad name", func(m map[string]any) { m["completed"] = []any{art("data-disk", dir+"/Data_1.qcow2")} }, "data-disk artifact"},
		{"bad operation uuid", func(m map[string]any) { m["operation_id"] = "op-1" }, "operation_id"},
		{"bad vm uuid", func(m map[string]any) { m["vm_uuid"] = "0b5ad2d85f394b8e9d7e3c1f1d7c2a10" }, "vm_uuid"},
		{"bad hash", func(m map[string]any) { m["spec_hash"] = "abc" }, "spec_hash"},
		{"prepared without invocation", func(m map[string]any) { m["prepared"] = true }, "invocation must be present"},
		{"committed with wrong state_path", func(m map[string]any) {
			m["prepared"] = true
			m["invocation"] = map[string]any{"binary": "q", "args": []any{}, "inherited_files": []any{}}
			m["state_committed"] = true
			m["state_path"] = "/tmp/state.json"
		}, "state_path"},
		{"state_path before commit", func(m map[string]any) { m["state_path"] = dir + "/state.json" }, "must be empty until state_committed"},
		{"intent outside the allowlist", func(m map[string]any) { m["intent"] = art("state", dir+"/state.json") }, "intent.kind"},
		{"intent outside the node dir", func(m map[string]any) { m["intent"] = art("seed", "/etc/seed.iso") }, "intent.path"},
		{"intent duplicates a completed artifact", func(m map[string]any) { m["intent"] = art("root-overlay", dir+"/root.qcow2") }, "is a duplicate"},
		{"intent once prepared", func(m map[string]any) {
			m["prepared"] = true
			m["invocation"] = map[string]any{"binary": "q", "args": []any{}, "inherited_files": []any{}}
			m["intent"] = art("seed", dir+"/seed.iso")
		}, "intent must be empty once prepared"},
		{"retained dir of another disk", func(m map[string]any) {
			a := art("data-disk", dir+"/data.qcow2")
			a["retained"] = r.RetainedDiskDir(node, "other")
			m["intent"] = a
		}, "intent.retained"},
		{"retained dir of another node", func(m map[string]any) {
			a := art("data-disk", dir+"/data.qcow2")
			a["retained"] = r.RetainedDiskDir("pg-2", "data")
			m["completed"] = []any{a}
		}, "completed[0].retained"},
		{"retained on a seed", func(m map[string]any) {
			a := art("seed", dir+"/seed.iso")
			a["retained"] = r.RetainedDiskDir(node, "seed")
			m["intent"] = a
		}, "only for data disks"},
		{"unknown field", func(m map[string]any) { m["rollback"] = true }, `unknown field "rollback"`},
		{"newer schema", func(m map[string]any) { m["schema"] = "barn.state.journal/v7" }, "newer Barn"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := r.WriteJournal(testJournal(r, node)); err != nil {
				t.Fatal(err)
			}
			mutateJSON(t, r.NodeFile(node, JournalName), c.f)
			_, err := r.ReadJournal(node)
			wantClass(t, err, exitcode.Integrity, c.substr)
			if !strings.Contains(err.Error(), r.NodeFile(node, JournalName)) {
				t.Fatalf("error does not name the file: %v", err)
			}
		})
	}
	// A write-ahead intent and a reattached disk round-trip.
	j = testJournal(r, node)
	j.Intent = &Artifact{Kind: DataDiskArt, Path: r.ArtifactPath(node, DataDiskArt, "data"), Retained: r.RetainedDiskDir(node, "data")}
	if err := r.WriteJournal(j); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ReadJournal(node); err != nil || got.Intent == nil || *got.Intent != *j.Intent {
		t.Fatalf("journal with intent = %+v, %v", got, err)
	}
	// A valid committed journal round-trips, and RemoveJournal removes it.
	j = testJournal(r, node)
	j.Completed = append(j.Completed, Artifact{Kind: DataDiskArt, Path: r.ArtifactPath(node, DataDiskArt, "data"), ID: ptr(testID(13))},
		Artifact{Kind: Seed, Path: r.ArtifactPath(node, Seed, ""), ID: ptr(testID(12))})
	j.Prepared, j.Invocation = true, &vmrecord.Invocation{Binary: "q"}
	j.StateCommitted, j.StatePath = true, r.NodeFile(node, NodeStateName)
	if err := r.WriteJournal(j); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ReadJournal(node); err != nil || !got.StateCommitted || len(got.Completed) != 3 {
		t.Fatalf("committed journal = %+v, %v", got, err)
	}
	if err := r.RemoveJournal(node); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ReadJournal(node); got != nil || err != nil {
		t.Fatalf("after RemoveJournal: %v, %v", got, err)
	}
	if err := r.RemoveJournal(node); err != nil {
		t.Fatalf("RemoveJournal twice: %v", err)
	}
}

func TestJournalSizeLimit(t *testing.T) {
	r := testRoot(t)
	if _, err := r.EnsureNodeDir("a"); err != nil {
		t.Fatal(err)
	}
	writeRaw(t, r.NodeFile("a", JournalName), `{"schema":"barn.state.journal/v1"}`+string(bytes.Repeat([]byte(" "), MaxJournalBytes)), 0o600)
	_, err := r.ReadJournal("a")
	wantClass(t, err, exitcode.Integrity, "larger than 1048576 bytes")
}

func TestTransactionRoundTripAndRejections(t *testing.T) {
	r := testRoot(t)
	tx := &Transaction{OperationID: "6f1c1a52-31c4-4f44-a1e5-1d0c6f0e9a11", Node: "a", From: Running, To: Stopped,
		Completed: []TxnStep{{Name: "powerdown", Resource: "qmp"}}}
	if err := r.WriteTransaction(tx); err != nil {
		t.Fatal(err)
	}
	got, err := r.ReadTransaction("a")
	if err != nil || got.From != Running || got.To != Stopped || len(got.Completed) != 1 {
		t.Fatalf("ReadTransaction = %+v, %v", got, err)
	}
	mutateJSON(t, r.NodeFile("a", TransactionName), func(m map[string]any) { m["to"] = "gone" })
	_, err = r.ReadTransaction("a")
	wantClass(t, err, exitcode.Integrity, `to "gone"`)
	if err := r.RemoveTransaction("a"); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ReadTransaction("a"); got != nil || err != nil {
		t.Fatalf("after RemoveTransaction: %v, %v", got, err)
	}
}

func TestWriteFileAtomicRefusals(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "victim")
	writeRaw(t, target, "keep", 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	wantClass(t, WriteFileAtomic(link, []byte("x"), 0o600), exitcode.Integrity, "symlink")
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Fatalf("symlink target was written: %q", b)
	}
	fileParent := filepath.Join(dir, "file")
	writeRaw(t, fileParent, "", 0o600)
	wantClass(t, WriteFileAtomic(filepath.Join(fileParent, "x"), []byte("x"), 0o600), exitcode.Integrity, "not a real directory")
	linkDir := filepath.Join(dir, "linkdir")
	if err := os.Symlink(dir, linkDir); err != nil {
		t.Fatal(err)
	}
	wantClass(t, WriteFileAtomic(filepath.Join(linkDir, "x"), []byte("x"), 0o600), exitcode.Integrity, "not a real directory")

	// A normal write is exact, 0600 regardless of umask, leaves no temp file.
	p := filepath.Join(dir, "doc.json")
	if err := WriteFileAtomic(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(p, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Lstat(p)
	if b, _ := os.ReadFile(p); string(b) != "two" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("content %q mode %v", b, fi.Mode())
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Fatalf("temporary file left behind: %s", e.Name())
		}
	}
}

// TestOperationFileNames: the staging name of an artifact, and the
// temporary files written beside it, carry the operation id; nothing else
// (another operation's, a plain node file, a look-alike) does.
func TestOperationFileNames(t *testing.T) {
	op := "6f1c1c8e-1d0b-4b55-9a57-4d0c4d8f3a11"
	stage := StagingName("/h/nodes/n1/root.qcow2", op)
	if stage != "/h/nodes/n1/.root.qcow2.barn-"+op {
		t.Fatalf("StagingName = %s", stage)
	}
	for name, want := range map[string]bool{
		".root.qcow2.barn-" + op:                 true, // the staging file
		"..root.qcow2.barn-" + op + ".tmp-12-34": true, // lib/disk's temporary beside it
		"..seed.iso.barn-" + op + "2718281828":   true, // safefile's pending file beside it
		".root.qcow2.barn-6f1c1c8e-0000":         false,
		".root.qcow2.barn-" + op + "x":           false,
		"root.qcow2.barn-" + op:                  false, // not hidden
		".root.qcow2":                            false,
		".root.qcow2.tmp-1-2":                    false, // a pre-write-ahead temporary: no proof
		".seed.iso.barn-" + strings.ToUpper(op):  false,
		".state.json12345":                       false, // a document temporary: proven by content
	} {
		if got := IsOperationFile(name, op); got != want {
			t.Errorf("IsOperationFile(%q) = %v, want %v", name, got, want)
		}
	}
	if IsOperationFile(".root.qcow2.barn-", "") {
		t.Error("an empty operation id matches")
	}
}

// TestReadInterruptedWrite: a document's leftover temporary reads as the
// document it was about to be, with the same checks; an empty one (a
// power loss) or another name is refused.
func TestReadInterruptedWrite(t *testing.T) {
	r := testRoot(t)
	node := "pg-1"
	j := testJournal(r, node)
	if err := r.WriteJournal(j); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(r.NodeFile(node, JournalName))
	if err != nil {
		t.Fatal(err)
	}
	writeRaw(t, r.NodeFile(node, ".prepare.json123"), string(data), 0o600)
	d, err := r.ReadInterruptedWrite(node, ".prepare.json123")
	if err != nil || d.Journal == nil || d.Journal.OperationID != j.OperationID || d.State != nil || d.Transaction != nil {
		t.Fatalf("journal temp = %+v, %v", d, err)
	}
	writeRaw(t, r.NodeFile(node, ".state.json9"), "", 0o600)
	_, err = r.ReadInterruptedWrite(node, ".state.json9")
	wantClass(t, err, exitcode.Integrity, "is empty")
	writeRaw(t, r.NodeFile(node, ".prepare.json77"), string(data), 0o644)
	_, err = r.ReadInterruptedWrite(node, ".prepare.json77")
	wantClass(t, err, exitcode.Integrity, "has mode 0644")
	_, err = r.ReadInterruptedWrite(node, "notes.txt")
	wantClass(t, err, exitcode.Usage, "not a temporary file")
}

// TestEarlierDevBuildDocumentsAreRefused: node state or a prepare journal
// from a development build that recorded no file identities (or a QEMU
// process tuple without its executable's file or boot id) is refused
// as integrity (7), reason dev_build_format, naming the file and the one
// action that helps — never read as if Barn owned its files.
func TestEarlierDevBuildDocumentsAreRefused(t *testing.T) {
	r := testRoot(t)
	s := testSpec("pg-1")
	n := testNode(r, s, "pg-1")
	delete(n.Files, SeedName)
	if err := r.WriteNode(n); err != nil {
		t.Fatal(err)
	}
	path := r.NodeFile("pg-1", NodeStateName)
	_, err := r.ReadNode("pg-1")
	e := exitcode.As(err)
	if e == nil || e.Class != exitcode.Integrity || e.Reason != EarlierBuildReason ||
		!strings.Contains(e.Message, path) || !strings.Contains(e.Message, "seed.iso") || !strings.Contains(e.Next, "move "+r.NodeDir("pg-1")) {
		t.Fatalf("node state without identities: %+v", e)
	}
	n = testNode(r, s, "pg-1")
	n.Runtime.BarnQMP = ""
	if err := r.WriteNode(n); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadNode("pg-1"); exitcode.As(err).Reason != EarlierBuildReason || !strings.Contains(err.Error(), "barn_qmp") {
		t.Fatalf("node state without Barn's monitor: %v", err)
	}
	n = testNode(r, s, "pg-1")
	n.SerialLog = ""
	delete(n.Files, SerialLogName)
	if err := r.WriteNode(n); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadNode("pg-1"); exitcode.As(err).Reason != EarlierBuildReason || !strings.Contains(err.Error(), "serial_log") {
		t.Fatalf("node state without a serial console file: %v", err)
	}
	for _, strip := range []func(*vmrecord.Process){
		func(p *vmrecord.Process) { p.ExecutableFile = "" },
		func(p *vmrecord.Process) { p.Boot = "" },
	} {
		n = testNode(r, s, "pg-1")
		n.Phase = Running
		n.Process = &vmrecord.Process{PID: 4242, Executable: "/usr/bin/qemu-system-x86_64", ExecutableFile: "1:1",
			Started: "procstat:1", ArgvHash: strings.Repeat("0", 64), Boot: "b0"}
		strip(n.Process)
		if err := r.WriteNode(n); err != nil {
			t.Fatal(err)
		}
		_, err = r.ReadNode("pg-1")
		if e := exitcode.As(err); e == nil || e.Class != exitcode.Integrity || e.Reason != EarlierBuildReason ||
			!strings.Contains(e.Message, "process 4242") || !strings.Contains(e.Next, "stop pg-1's QEMU") {
			t.Fatalf("node state with an incomplete process tuple: %+v", e)
		}
	}
	if err := r.RemoveNode("pg-1"); err != nil {
		t.Fatal(err)
	}
	j := testJournal(r, "pg-1")
	j.Completed[0].ID = nil
	if err := r.WriteJournal(j); err != nil {
		t.Fatal(err)
	}
	_, err = r.ReadJournal("pg-1")
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Integrity || e.Reason != EarlierBuildReason ||
		!strings.Contains(e.Message, r.NodeFile("pg-1", JournalName)) {
		t.Fatalf("journal without identities: %+v", e)
	}
}
