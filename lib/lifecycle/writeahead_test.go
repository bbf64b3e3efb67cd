package lifecycle

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"barn.dev/lib/disk"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
	"barn.dev/lib/safefile"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
)

// crashed is what the test hook panics with to stop prepare at a step, as
// BARN_CRASH_AFTER's SIGKILL does in the testscripts.
type crashed struct{ step string }

// writeAheadFixture is one state root with a verified base, a retained
// persistent disk "data" (bytes "precious") in the store, and a uefi node
// n1 with that disk plus a fresh "scratch" disk: every kind of artifact.
type writeAheadFixture struct {
	m   *Manager
	job createJob
}

type fakeImages struct{ base string }

func (f fakeImages) Ensure(context.Context, imageref.Identity) (string, error) { return f.base, nil }
func (f fakeImages) Verify(context.Context, imageref.Identity) (string, error) { return f.base, nil }

type fakeSeeder struct{}

func (fakeSeeder) WriteSeed(_ context.Context, path string, in SeedInput) error {
	return safefile.Write(path, []byte("instance-id: "+in.VMUUID+"\n"), 0o600)
}

type fakeEmu struct{ vars string }

func (fakeEmu) Accel() string                    { return "tcg" }
func (fakeEmu) PrivateNet() string               { return "none" }
func (fakeEmu) Supports(imageref.Identity) error { return nil }
func (e fakeEmu) Firmware(string) (string, string, error) {
	return e.vars, e.vars, nil
}
func (fakeEmu) Invocation(in LaunchInput) (state.Invocation, error) {
	return state.Invocation{Binary: "qemu-system-x86_64", Args: []string{"-name", in.Node.Name,
		"-pidfile", in.Runtime.Pidfile, "-qmp", "unix:" + in.Runtime.QMP + ",server=on,wait=off"}}, nil
}

func newWriteAheadFixture(t *testing.T) *writeAheadFixture {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img is not installed: ", err)
	}
	root := testRoot(t)
	tmp := t.TempDir()
	base := filepath.Join(tmp, "base.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", base, "16M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v: %s", err, out)
	}
	vars := filepath.Join(tmp, "OVMF_VARS.fd")
	if err := os.WriteFile(vars, []byte("uefi vars template"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := spec.Disk{Name: "data", Mount: "/data", SizeBytes: 64 << 20, FS: "auto", Persistent: true, Serial: "datadisk0001"}
	scratch := spec.Disk{Name: "scratch", Mount: "/scratch", SizeBytes: 32 << 20, FS: "auto", Serial: "scratch0001"}
	// the retained disk, as a destroy left it
	src := filepath.Join(tmp, "data.qcow2")
	if err := os.WriteFile(src, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir, err := root.EnsureRetainedDiskDir("n1", "data")
	if err != nil {
		t.Fatal(err)
	}
	if err := disk.Preserve(src, dir, disk.Ownership{Node: "n1", Name: "data", Serial: data.Serial, SizeBytes: data.SizeBytes, Mount: data.Mount, Filesystem: "xfs"}); err != nil {
		t.Fatal(err)
	}
	n := spec.Node{Name: "n1", Address: "10.10.10.10", CPUs: 1, MemoryBytes: 512 << 20, RootDiskBytes: 32 << 20,
		Disks: []spec.Disk{data, scratch}, SpecHash: strings.Repeat("a", 64)}
	m := &Manager{Root: root, Emu: fakeEmu{vars: vars}, Images: fakeImages{base: base}, Seeds: fakeSeeder{}}
	return &writeAheadFixture{m: m, job: createJob{Node: n, Image: imageref.Identity{Boot: "uefi", VirtualSize: 16 << 20}, Generation: 1, SSHPort: 2222}}
}

// prepareUntil runs prepare, crashing at step (never when step is "").
func (f *writeAheadFixture) prepareUntil(t *testing.T, step string) (err error, crashedAt bool) {
	t.Helper()
	f.m.Hook = func(s, _ string) {
		if s == step {
			panic(crashed{s})
		}
	}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(crashed); !ok {
				panic(r)
			}
			crashedAt = true
		}
		f.m.Hook = nil
	}()
	_, err = f.m.prepare(context.Background(), f.job)
	return err, false
}

// listDir lists dir's entries ("" when dir is gone).
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

// steps records every hook step of one uninterrupted prepare.
func prepareSteps(t *testing.T) []string {
	f := newWriteAheadFixture(t)
	var steps []string
	f.m.Hook = func(s, _ string) { steps = append(steps, s) }
	if _, err := f.m.prepare(context.Background(), f.job); err != nil {
		t.Fatal(err)
	}
	return steps
}

// TestWriteAheadCrashAtEveryGap: a create killed at any step — after an
// intent is journaled and before its artifact exists, after the artifact
// exists and before the journal records it, around a retained disk's
// move, and at every durable step — is settled by the next create with
// nothing lost (the retained disk's bytes are either back in the store
// beside their marker or in the committed node) and nothing unowned (no
// file left that no record names), and the create then succeeds.
func TestWriteAheadCrashAtEveryGap(t *testing.T) {
	steps := prepareSteps(t)
	for _, want := range []string{"journal", "create-root-overlay", "created-root-overlay", "root-overlay",
		"reattach-data-disk", "reattached-data-disk", "create-data-disk", "created-data-disk", "data-disk",
		"create-seed", "created-seed", "seed", "create-nvram", "created-nvram", "nvram",
		"prepared", "committed", "journal-committed", "released"} {
		found := false
		for _, s := range steps {
			found = found || s == want
		}
		if !found {
			t.Fatalf("prepare never reached step %q (steps %v)", want, steps)
		}
	}
	seen := map[string]bool{}
	for _, step := range steps {
		if seen[step] {
			continue // a second data disk crashes at the first
		}
		seen[step] = true
		t.Run(step, func(t *testing.T) {
			f := newWriteAheadFixture(t)
			root := f.m.Root
			store := root.RetainedDiskDir("n1", "data")
			nodeDir := root.NodeDir("n1")
			if err, hit := f.prepareUntil(t, step); !hit {
				t.Fatalf("did not crash at %s (err %v)", step, err)
			}
			rec, err := f.m.settle("n1")
			if err != nil {
				t.Fatalf("settle after a crash at %s: %v (node dir %v)", step, err, listDir(t, nodeDir))
			}
			if rec.Committed != nil {
				// committed: the node owns the reattached disk, the store is empty
				if got := listDir(t, store); got != nil {
					t.Fatalf("store still holds %v after a committed create", got)
				}
				if b, err := os.ReadFile(root.NodeFile("n1", "data.qcow2")); err != nil || string(b) != "precious" {
					t.Fatalf("committed node's data disk: %q, %v", b, err)
				}
				want := []string{"data.qcow2", "nvram.fd", "root.qcow2", "scratch.qcow2", "seed.iso", "state.json"}
				if got := listDir(t, nodeDir); strings.Join(got, " ") != strings.Join(want, " ") {
					t.Fatalf("node dir after settling = %v, want %v", got, want)
				}
				return
			}
			// rolled back: the node dir is gone, the disk is back beside its marker
			if got := listDir(t, nodeDir); got != nil {
				t.Fatalf("node dir after rollback = %v", got)
			}
			if got := listDir(t, store); strings.Join(got, " ") != "disk.qcow2 ownership.json" {
				t.Fatalf("store after rollback = %v", got)
			}
			if b, err := os.ReadFile(filepath.Join(store, disk.RetainedDiskFile)); err != nil || string(b) != "precious" {
				t.Fatalf("retained disk after rollback: %q, %v", b, err)
			}
			// and the next create succeeds, reattaching it
			if err, _ := f.prepareUntil(t, ""); err != nil {
				t.Fatalf("create after rollback: %v", err)
			}
			if got := listDir(t, store); got != nil {
				t.Fatalf("store after the second create = %v", got)
			}
			if b, _ := os.ReadFile(root.NodeFile("n1", "data.qcow2")); string(b) != "precious" {
				t.Fatalf("reattached disk after the second create: %q", b)
			}
		})
	}
}

// TestRollbackProvesTheIntendedFileIsBarns: while the journal's intent
// names an artifact, a file at its path is removed only when it is the
// file the create published (a second link of its staging file); one that
// appeared there otherwise blocks the rollback and nothing is removed.
func TestRollbackProvesTheIntendedFileIsBarns(t *testing.T) {
	for _, c := range []struct {
		name   string
		plant  func(t *testing.T, path, stage string)
		reason string
	}{
		{"foreign file, no staging file", func(t *testing.T, path, stage string) {
			if err := os.WriteFile(path, []byte("operator's"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "unexpected_files"},
		{"foreign file beside a staging file", func(t *testing.T, path, stage string) {
			if err := os.WriteFile(stage, []byte("ours"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte("operator's"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "unexpected_files"},
		{"published: same file", func(t *testing.T, path, stage string) {
			if err := os.WriteFile(stage, []byte("ours"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := safefile.LinkNew(stage, path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"crashed while creating: staging only", func(t *testing.T, path, stage string) {
			if err := os.WriteFile(stage, []byte("partial"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(filepath.Dir(stage), "."+filepath.Base(stage)+".tmp-1-2"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &Manager{Root: testRoot(t)}
			dir, err := m.Root.EnsureNodeDir("n1")
			if err != nil {
				t.Fatal(err)
			}
			j := testJournalFor(m, "n1")
			seed := m.Root.NodeFile("n1", state.SeedName)
			j.Intent = &state.Artifact{Kind: state.Seed, Path: seed}
			if err := m.Root.WriteJournal(j); err != nil {
				t.Fatal(err)
			}
			c.plant(t, seed, state.StagingName(seed, j.OperationID))
			before := listDir(t, dir)
			_, err = m.settle("n1")
			if c.reason != "" {
				if exitcode.As(err).Reason != c.reason {
					t.Fatalf("err = %v, want %s", err, c.reason)
				}
				if got := listDir(t, dir); strings.Join(got, " ") != strings.Join(before, " ") {
					t.Fatalf("a refused rollback changed the directory: %v → %v", before, got)
				}
				if b, _ := os.ReadFile(seed); string(b) != "operator's" {
					t.Fatalf("foreign file changed: %q", b)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := listDir(t, dir); got != nil {
				t.Fatalf("left %v", got)
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
		content func(m *Manager, j *state.Journal) []byte
		ok      bool
	}{
		{"this operation's journal", func(m *Manager, j *state.Journal) []byte {
			b, _ := os.ReadFile(m.Root.NodeFile("n1", state.JournalName))
			return b
		}, true},
		{"empty (power loss)", func(*Manager, *state.Journal) []byte { return nil }, false},
		{"another operation's journal", func(m *Manager, j *state.Journal) []byte {
			b, _ := os.ReadFile(m.Root.NodeFile("n1", state.JournalName))
			return []byte(strings.Replace(string(b), j.OperationID, "0b7c5d35-8a58-4f7e-9a36-1c8d7a4f2b99", 1))
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &Manager{Root: testRoot(t)}
			if _, err := m.Root.EnsureNodeDir("n1"); err != nil {
				t.Fatal(err)
			}
			j := testJournalFor(m, "n1")
			if err := m.Root.WriteJournal(j); err != nil {
				t.Fatal(err)
			}
			temp := m.Root.NodeFile("n1", ".prepare.json4242")
			if err := os.WriteFile(temp, c.content(m, j), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := m.settle("n1")
			if c.ok {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Lstat(temp); !errors.Is(err, os.ErrNotExist) {
					t.Fatal("proven temporary kept")
				}
				return
			}
			if exitcode.As(err).Reason != "unexpected_files" {
				t.Fatalf("err = %v", err)
			}
			if _, err := os.Lstat(temp); err != nil {
				t.Fatal("unproven temporary removed")
			}
		})
	}
}

// TestRollbackOfAReattachNeverLosesTheDisk: a journaled reattach whose
// disk is neither in the node directory nor in the store stops the
// rollback (integrity) with the marker and journal kept; one found in both
// places is a conflict and neither copy is touched.
func TestRollbackOfAReattachNeverLosesTheDisk(t *testing.T) {
	f := newWriteAheadFixture(t)
	if err, hit := f.prepareUntil(t, "reattached-data-disk"); !hit {
		t.Fatal(err)
	}
	root := f.m.Root
	store := root.RetainedDiskDir("n1", "data")
	lent := root.NodeFile("n1", "data.qcow2")
	moved := filepath.Join(t.TempDir(), "elsewhere.qcow2")
	if err := os.Rename(lent, moved); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.settle("n1"); exitcode.As(err).Reason != "persistent_disk_missing" {
		t.Fatalf("err = %v", err)
	}
	if got := listDir(t, store); strings.Join(got, " ") != "ownership.json" {
		t.Fatalf("store = %v", got)
	}
	if _, err := os.Lstat(root.NodeFile("n1", state.JournalName)); err != nil {
		t.Fatal("journal removed by a refused rollback")
	}
	// the disk in both places
	if err := os.Rename(moved, lent); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, disk.RetainedDiskFile), []byte("other"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.settle("n1"); exitcode.ClassOf(err) != exitcode.Conflict {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(lent); string(b) != "precious" {
		t.Fatalf("node copy changed: %q", b)
	}
}

func testJournalFor(m *Manager, node string) *state.Journal {
	return &state.Journal{Schema: state.JournalSchema, OperationID: "6f1c1c8e-1d0b-4b55-9a57-4d0c4d8f3a11", Node: node,
		VMUUID: "0b7c5d35-8a58-4f7e-9a36-1c8d7a4f2b10", SpecHash: strings.Repeat("a", 64),
		Completed: []state.Artifact{}, StartedAt: m.now(), UpdatedAt: m.now()}
}
