package nodedir

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"barn.dev/lib/disk"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/safefile"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
	"barn.dev/lib/vmrecord"
)

const (
	opID   = "6f1c1c8e-1d0b-4b55-9a57-4d0c4d8f3a11"
	vmUUID = "0b7c5d35-8a58-4f7e-9a36-1c8d7a4f2b10"
)

// crashed is what a test hook panics with to stop at a step, as
// BARN_CRASH_AFTER's SIGKILL does in the script tests.
type crashed struct{ step string }

func testStore(t *testing.T) *Store {
	t.Helper()
	home := filepath.Join(t.TempDir(), ".barn")
	rt, err := os.MkdirTemp("/tmp", "nd") // short: socket paths are at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	env := map[string]string{"BARN_HOME": home, "BARN_RUNTIME_DIR": rt}
	root, err := state.Open(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return &Store{Root: root}
}

// listDir lists dir's entries (nil when dir is gone).
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func write(bytes string) func(stage string) error {
	return func(stage string) error { return safefile.Write(stage, []byte(bytes), 0o600) }
}

var (
	dataDisk    = spec.Disk{Name: "data", Mount: "/data", SizeBytes: 64 << 20, FS: "auto", Persistent: true, Serial: "datadisk0001"}
	scratchDisk = spec.Disk{Name: "scratch", Mount: "/scratch", SizeBytes: 32 << 20, FS: "auto", Serial: "scratch0001"}
)

// retain puts a retained persistent disk "data" (bytes "precious") for n1
// in the store, as a destroy leaves it.
func retain(t *testing.T, s *Store) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "data.qcow2")
	if err := os.WriteFile(src, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	id, err := fileid.Of(src)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := s.Root.EnsureRetainedDiskDir("n1", "data")
	if err != nil {
		t.Fatal(err)
	}
	if err := disk.Preserve(src, dir, disk.Ownership{Node: "n1", Name: "data", Serial: dataDisk.Serial, SizeBytes: dataDisk.SizeBytes,
		Mount: dataDisk.Mount, Filesystem: "xfs", Disk: &id}); err != nil {
		t.Fatal(err)
	}
}

// create runs a whole create of n1 (every kind of artifact: a root
// overlay, the retained disk reattached, a fresh disk, a seed and UEFI
// vars), crashing at step (never when step is ""). It returns the steps
// reached.
func create(t *testing.T, s *Store, step string) (steps []string, err error, hit bool) {
	t.Helper()
	s.Hook = func(st, node string, durable bool) {
		steps = append(steps, st)
		if st == step {
			panic(crashed{st})
		}
	}
	defer func() {
		s.Hook = nil
		if r := recover(); r != nil {
			if _, ok := r.(crashed); !ok {
				panic(r)
			}
			hit = true
		}
	}()
	return steps, createN1(s), false
}

func createN1(s *Store) error {
	c, err := s.Begin("n1", opID, vmUUID, strings.Repeat("a", 64))
	if err != nil {
		return err
	}
	n := &state.Node{Schema: state.NodeSchema, Node: "n1", VMUUID: vmUUID, Phase: state.Prepared, Generation: 1,
		SpecHash: strings.Repeat("a", 64), Spec: spec.Node{Name: "n1", Disks: []spec.Disk{dataDisk, scratchDisk}},
		Accel: "tcg", SSHPort: 2222, RootDisk: c.Path(state.RootDiskName), Seed: c.Path(state.SeedName), NVRAM: c.Path(state.NVRAMName)}
	if err := c.Artifact(state.RootOverlay, n.RootDisk, write("root")); err != nil {
		return err
	}
	for _, d := range []spec.Disk{dataDisk, scratchDisk} {
		dd := vmrecord.DataDisk{Name: d.Name, Path: c.Path(state.DataDiskFileName(d.Name)), Serial: d.Serial, SizeBytes: d.SizeBytes,
			Mount: d.Mount, Persistent: d.Persistent, RequestedFilesystem: d.FS}
		if own, err := c.Reattach(d, dd.Path); err != nil {
			return err
		} else if own == nil {
			if err := c.Artifact(state.DataDiskArt, dd.Path, write("fresh")); err != nil {
				return err
			}
		}
		n.DataDisks = append(n.DataDisks, dd)
	}
	n.SerialLog = c.Path(state.SerialLogName)
	if err := c.Artifact(state.SerialLogArt, n.SerialLog, EmptyFile); err != nil {
		return err
	}
	if err := c.Artifact(state.Seed, n.Seed, write("instance-id: "+vmUUID)); err != nil {
		return err
	}
	if err := c.Artifact(state.NVRAM, n.NVRAM, write("vars")); err != nil {
		return err
	}
	if n.Runtime, err = s.Root.EnsureNodeRuntime("n1"); err != nil {
		return err
	}
	n.Invocation = vmrecord.Invocation{Binary: "qemu-system-x86_64", Args: []string{"-name", "n1", "-pidfile", n.Runtime.Pidfile},
		InheritedFiles: []vmrecord.InheritedFile{}}
	if err := c.Prepared(n.Invocation); err != nil {
		return err
	}
	n.CreatedAt, n.UpdatedAt = time.Now().UTC(), time.Now().UTC()
	return c.Commit(n)
}

// TestCreateCrashAtEveryStep: a create killed at any step — after an
// intent is journaled and before its artifact exists, after the artifact
// exists and before the journal records it, around a retained disk's
// move, and at every durable step — is settled by Settle with nothing
// lost (the retained disk's bytes are either back in the store beside
// their marker or in the committed node) and nothing unowned (no file
// that no record names), and the create then succeeds.
func TestCreateCrashAtEveryStep(t *testing.T) {
	s := testStore(t)
	retain(t, s)
	steps, err, _ := create(t, s, "")
	if err != nil {
		t.Fatal(err)
	}
	want := "journal create-root-overlay staged-root-overlay created-root-overlay root-overlay reattach-data-disk reattached-data-disk data-disk " +
		"create-data-disk staged-data-disk created-data-disk data-disk create-serial-log staged-serial-log created-serial-log serial-log create-seed staged-seed created-seed seed create-nvram staged-nvram created-nvram nvram " +
		"prepared committed journal-committed released"
	if got := strings.Join(steps, " "); got != want {
		t.Fatalf("steps = %s\nwant    %s", got, want)
	}
	seen := map[string]bool{}
	for _, step := range steps {
		if seen[step] {
			continue // the second data disk crashes at the first's step
		}
		seen[step] = true
		t.Run(step, func(t *testing.T) { crashAndSettle(t, step) })
	}
}

func crashAndSettle(t *testing.T, step string) {
	s := testStore(t)
	retain(t, s)
	store := s.Root.RetainedDiskDir("n1", "data")
	nodeDir := s.Root.NodeDir("n1")
	if _, err, hit := create(t, s, step); !hit {
		t.Fatalf("did not crash at %s (err %v)", step, err)
	}
	rec, err := s.Settle("n1")
	if err != nil {
		t.Fatalf("settle after a crash at %s: %v (node dir %v)", step, err, listDir(t, nodeDir))
	}
	if rec.Committed != nil {
		if got := listDir(t, store); got != nil {
			t.Fatalf("store still holds %v after a committed create", got)
		}
		if b, err := os.ReadFile(s.Root.NodeFile("n1", "data.qcow2")); err != nil || string(b) != "precious" {
			t.Fatalf("committed node's data disk: %q, %v", b, err)
		}
		want := "data.qcow2 nvram.fd root.qcow2 scratch.qcow2 seed.iso serial.log state.json"
		if got := strings.Join(listDir(t, nodeDir), " "); got != want {
			t.Fatalf("node dir after settling = %v, want %v", got, want)
		}
		if len(rec.Committed.Files) != 6 {
			t.Fatalf("committed files = %v", rec.Committed.Files)
		}
		return
	}
	if got := listDir(t, nodeDir); got != nil {
		t.Fatalf("node dir after rollback = %v", got)
	}
	if got := strings.Join(listDir(t, store), " "); got != "disk.qcow2 ownership.json" {
		t.Fatalf("store after rollback = %v", got)
	}
	if b, err := os.ReadFile(filepath.Join(store, disk.RetainedDiskFile)); err != nil || string(b) != "precious" {
		t.Fatalf("retained disk after rollback: %q, %v", b, err)
	}
	if _, err, _ := create(t, s, ""); err != nil {
		t.Fatalf("create after rollback: %v", err)
	}
	if got := listDir(t, store); got != nil {
		t.Fatalf("store after the second create = %v", got)
	}
}

// TestSettleRefusesWhatTheJournalDoesNotProve: a file the journal does
// not name, a runtime pidfile, or a completed artifact replaced by
// another file blocks the rollback and nothing is removed; once cleared,
// only the journaled artifact goes, then the directory.
func TestSettleRefusesWhatTheJournalDoesNotProve(t *testing.T) {
	s := testStore(t)
	dir, err := s.Root.EnsureNodeDir("n1")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, state.RootDiskName)
	if err := os.WriteFile(root, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	id, err := fileid.Of(root)
	if err != nil {
		t.Fatal(err)
	}
	j := testJournal("n1")
	j.Completed = []state.Artifact{{Kind: state.RootOverlay, Path: root, ID: &id}}
	if err := s.Root.WriteJournal(j); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(stray, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Settle("n1"); exitcode.As(err).Reason != "unexpected_files" {
		t.Fatalf("stray file: err = %v", err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Fatal("blocked rollback removed an artifact")
	}
	os.Remove(stray)
	rt, _ := s.Root.EnsureNodeRuntime("n1")
	if err := os.WriteFile(rt.Pidfile, []byte("1"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Settle("n1"); exitcode.As(err).Reason != "runtime_present" {
		t.Fatalf("pidfile: err = %v", err)
	}
	os.Remove(rt.Pidfile)
	// the artifact replaced by another file (a new inode at the name)
	other := root + ".new"
	if err := os.WriteFile(other, []byte("operator's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, root); err != nil {
		t.Fatal(err)
	}
	_, err = s.Settle("n1")
	if e := exitcode.As(err); e == nil || e.Reason != "unexpected_files" || !strings.Contains(e.Message, "root.qcow2 (not the file this create published") {
		t.Fatalf("replaced artifact: err = %v", err)
	}
	if b, _ := os.ReadFile(root); string(b) != "operator's" {
		t.Fatalf("the replacing file changed: %q", b)
	}
	// Barn's file back (its identity recorded anew): rolled back
	if id, err = fileid.Of(root); err != nil {
		t.Fatal(err)
	}
	j.Completed[0].ID = &id
	if err := s.Root.WriteJournal(j); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Settle("n1")
	if err != nil || len(rec.RolledBack) != 1 || rec.RolledBack[0] != root {
		t.Fatalf("rollback = %+v, %v", rec, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("node directory kept after rollback")
	}
}

func testJournal(node string) *state.Journal {
	now := time.Now().UTC()
	return &state.Journal{Schema: state.JournalSchema, OperationID: opID, Node: node, VMUUID: vmUUID, SpecHash: strings.Repeat("a", 64),
		Completed: []state.Artifact{}, StartedAt: now, UpdatedAt: now}
}

// TestRollbackProvesTheIntendedFileIsBarns: while the journal's intent
// names an artifact, a file at its path is removed only when it is the
// identity the intent records (its staging file's, journaled before the
// link); one that appeared there otherwise blocks the rollback and
// nothing is removed.
func TestRollbackProvesTheIntendedFileIsBarns(t *testing.T) {
	writeFile := func(t *testing.T, p, b string) {
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name   string
		plant  func(t *testing.T, path, stage string) *fileid.ID
		reason string
	}{
		{"foreign file, no staging file", func(t *testing.T, path, stage string) *fileid.ID {
			writeFile(t, path, "operator's")
			return nil
		}, "unexpected_files"},
		{"foreign file beside a staging file", func(t *testing.T, path, stage string) *fileid.ID {
			writeFile(t, stage, "ours")
			writeFile(t, path, "operator's")
			return nil
		}, "unexpected_files"},
		{"foreign file beside a journaled staging file", func(t *testing.T, path, stage string) *fileid.ID {
			writeFile(t, stage, "ours")
			id := identity(t, stage)
			writeFile(t, path, "operator's")
			return id
		}, "unexpected_files"},
		{"published: the journaled file", func(t *testing.T, path, stage string) *fileid.ID {
			writeFile(t, stage, "ours")
			id := identity(t, stage)
			if err := safefile.LinkNew(stage, path, 0o600); err != nil {
				t.Fatal(err)
			}
			return id
		}, ""},
		{"crashed while creating: staging only", func(t *testing.T, path, stage string) *fileid.ID {
			writeFile(t, stage, "partial")
			writeFile(t, filepath.Join(filepath.Dir(stage), "."+filepath.Base(stage)+".tmp-1-2"), "")
			return nil
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := testStore(t)
			dir, err := s.Root.EnsureNodeDir("n1")
			if err != nil {
				t.Fatal(err)
			}
			j := testJournal("n1")
			seed := s.Root.NodeFile("n1", state.SeedName)
			j.Intent = &state.Artifact{Kind: state.Seed, Path: seed}
			j.Intent.ID = c.plant(t, seed, state.StagingName(seed, j.OperationID))
			if err := s.Root.WriteJournal(j); err != nil {
				t.Fatal(err)
			}
			before := listDir(t, dir)
			_, err = s.Settle("n1")
			if c.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := listDir(t, dir); got != nil {
					t.Fatalf("left %v", got)
				}
				return
			}
			if exitcode.As(err).Reason != c.reason {
				t.Fatalf("err = %v, want %s", err, c.reason)
			}
			if got := listDir(t, dir); strings.Join(got, " ") != strings.Join(before, " ") {
				t.Fatalf("a refused rollback changed the directory: %v → %v", before, got)
			}
			if b, _ := os.ReadFile(seed); string(b) != "operator's" {
				t.Fatalf("foreign file changed: %q", b)
			}
		})
	}
}

// TestRollbackRemovesOnlyProvenDocumentTemps: a journal write cut short
// leaves ".prepare.json<digits>"; it is removed only when it holds this
// operation's journal. An empty one, or another operation's, is not
// Barn's to remove here and blocks the rollback.
func TestRollbackRemovesOnlyProvenDocumentTemps(t *testing.T) {
	for _, c := range []struct {
		name    string
		content func(journal []byte) []byte
		ok      bool
	}{
		{"this operation's journal", func(b []byte) []byte { return b }, true},
		{"empty (power loss)", func([]byte) []byte { return nil }, false},
		{"another operation's journal", func(b []byte) []byte {
			return []byte(strings.Replace(string(b), opID, "0b7c5d35-8a58-4f7e-9a36-1c8d7a4f2b99", 1))
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := testStore(t)
			if _, err := s.Root.EnsureNodeDir("n1"); err != nil {
				t.Fatal(err)
			}
			if err := s.Root.WriteJournal(testJournal("n1")); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(s.Root.NodeFile("n1", state.JournalName))
			if err != nil {
				t.Fatal(err)
			}
			temp := s.Root.NodeFile("n1", ".prepare.json4242")
			if err := os.WriteFile(temp, c.content(b), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = s.Settle("n1")
			_, lerr := os.Lstat(temp)
			switch {
			case c.ok && (err != nil || !errors.Is(lerr, os.ErrNotExist)):
				t.Fatalf("proven temporary: err %v, still there: %v", err, lerr == nil)
			case !c.ok && (exitcode.As(err).Reason != "unexpected_files" || lerr != nil):
				t.Fatalf("unproven temporary: err %v, stat %v", err, lerr)
			}
		})
	}
}

// TestRollbackOfAReattachNeverLosesTheDisk: a journaled reattach whose
// disk is neither in the node directory nor in the store stops the
// rollback (integrity) with the marker and journal kept; one found in both
// places is a conflict and neither copy is touched.
func TestRollbackOfAReattachNeverLosesTheDisk(t *testing.T) {
	s := testStore(t)
	retain(t, s)
	if _, err, hit := create(t, s, "reattached-data-disk"); !hit {
		t.Fatal(err)
	}
	store := s.Root.RetainedDiskDir("n1", "data")
	lent := s.Root.NodeFile("n1", "data.qcow2")
	moved := filepath.Join(t.TempDir(), "elsewhere.qcow2")
	if err := os.Rename(lent, moved); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Settle("n1"); exitcode.As(err).Reason != "persistent_disk_missing" {
		t.Fatalf("err = %v", err)
	}
	if got := strings.Join(listDir(t, store), " "); got != "ownership.json" {
		t.Fatalf("store = %v", got)
	}
	if _, err := os.Lstat(s.Root.NodeFile("n1", state.JournalName)); err != nil {
		t.Fatal("journal removed by a refused rollback")
	}
	if err := os.Rename(moved, lent); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, disk.RetainedDiskFile), []byte("other"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Settle("n1"); exitcode.ClassOf(err) != exitcode.Conflict {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(lent); string(b) != "precious" {
		t.Fatalf("node copy changed: %q", b)
	}
}

func identity(t *testing.T, p string) *fileid.ID {
	t.Helper()
	id, err := fileid.OfContent(p)
	if err != nil {
		t.Fatal(err)
	}
	return &id
}

// swapAt runs a create of n1 whose hook replaces the file at name with an
// operator's file ("operator's") at step, then returns the create's error.
func swapAt(t *testing.T, s *Store, step, name string) error {
	t.Helper()
	s.Hook = func(st, node string, durable bool) {
		if st != step {
			return
		}
		p := s.Root.NodeFile(node, name)
		if err := os.Rename(p, filepath.Join(t.TempDir(), "aside")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("operator's"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { s.Hook = nil }()
	return createN1(s)
}

// A file swapped in at an artifact's path right after Barn linked it
// there is never recorded as Barn's: the create stops (conflict), the
// journal's completed list does not name it, and the rollback keeps it.
func TestCreateNeverRecordsAFileSwappedInAfterTheLink(t *testing.T) {
	s := testStore(t)
	err := swapAt(t, s, "created-seed", state.SeedName)
	if exitcode.As(err).Reason != "unexpected_files" {
		t.Fatalf("create with a swapped seed: %v", err)
	}
	j, err := s.Root.ReadJournal("n1")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range j.Completed {
		if a.Kind == state.Seed {
			t.Fatalf("the swapped-in seed was recorded as completed: %+v", a)
		}
	}
	if _, err := s.Settle("n1"); exitcode.As(err).Reason != "unexpected_files" {
		t.Fatalf("settle: %v", err)
	}
	if b, _ := os.ReadFile(s.Root.NodeFile("n1", state.SeedName)); string(b) != "operator's" {
		t.Fatalf("swapped-in seed now %q", b)
	}
}

// A file swapped in at the intent's path after the rollback proved it
// and before it removes it is kept: the removal checks the identity again.
func TestRollbackKeepsAFileSwappedInAfterTheProof(t *testing.T) {
	s := testStore(t)
	if _, err, hit := create(t, s, "created-nvram"); !hit {
		t.Fatal(err)
	}
	nvram := s.Root.NodeFile("n1", state.NVRAMName)
	s.Hook = func(st, node string, durable bool) {
		if st != "rollback-proven" {
			return
		}
		if err := os.Rename(nvram, filepath.Join(t.TempDir(), "aside")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(nvram, []byte("operator's"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.Settle("n1")
	s.Hook = nil
	if exitcode.As(err).Reason != "unexpected_files" {
		t.Fatalf("settle with a swap after the proof: %v", err)
	}
	if b, _ := os.ReadFile(nvram); string(b) != "operator's" {
		t.Fatalf("swapped-in nvram now %q", b)
	}
}

// A staging file of the create swapped for another file after the
// rollback proved it the operation's (by its name) and before it removes
// it is kept: leftovers are removed by the identity proven, never by name.
func TestRollbackKeepsALeftoverSwappedInAfterTheProof(t *testing.T) {
	s := testStore(t)
	if _, err, hit := create(t, s, "staged-nvram"); !hit {
		t.Fatal(err)
	}
	nvram := s.Root.NodeFile("n1", state.NVRAMName)
	stage := state.StagingName(nvram, opID)
	if _, err := os.Lstat(stage); err != nil {
		t.Fatalf("no staging file after a crash at staged-nvram: %v", err)
	}
	s.Hook = func(st, node string, durable bool) {
		if st != "rollback-proven" {
			return
		}
		if err := os.Rename(stage, filepath.Join(t.TempDir(), "aside")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(stage, []byte("operator's"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.Settle("n1")
	s.Hook = nil
	if e := exitcode.As(err); e == nil || e.Reason != "unexpected_files" {
		t.Fatalf("settle with a leftover swapped after the proof: %v", err)
	}
	if b, _ := os.ReadFile(stage); string(b) != "operator's" {
		t.Fatalf("swapped-in staging file now %q", b)
	}
}
