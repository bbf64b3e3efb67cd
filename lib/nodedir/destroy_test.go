package nodedir

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"barn.dev/lib/disk"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
)

// destroyN1 runs (or resumes, from the node's records) a destroy of n1
// that preserves its persistent disk, crashing at step (never when "").
func destroyN1(t *testing.T, s *Store, step string) (err error, hit bool) {
	t.Helper()
	s.Hook = func(st, _ string, durable bool) {
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
	docs, err := s.Root.ReadNodeDocuments("n1")
	if err != nil {
		return err, false
	}
	n := docs.State
	if n == nil {
		_, err := s.SettleForDestroy("n1", docs)
		return err, false
	}
	d, _, err := s.BeginDestroy(n, docs.Transaction, "9d6f8a52-5a0e-4a43-8f43-2b8c6c1d9e01")
	if err != nil {
		return err, false
	}
	if !d.Done("stopped") {
		n.Phase = state.Destroying
		if err := s.Root.WriteNode(n); err != nil {
			return err, false
		}
		if err := d.Step("stopped", "n1"); err != nil {
			return err, false
		}
	}
	files := []string{n.RootDisk, n.Seed, n.NVRAM, n.SerialLog}
	for _, dd := range n.DataDisks {
		if !dd.Persistent {
			files = append(files, dd.Path)
		} else if _, err := d.Preserve(dd); err != nil {
			return err, false
		}
	}
	if err := d.RemoveArtifacts(files); err != nil {
		return err, false
	}
	return d.Finish(), false
}

// TestDestroyCrashAtEveryStep: a destroy killed after any recorded step
// is resumed from the node's transaction record to the same end — the
// node directory gone, the persistent disk's bytes retained beside their
// marker, no record left — and the retained disk is reattached by the
// next create.
func TestDestroyCrashAtEveryStep(t *testing.T) {
	for _, step := range []string{"", "stopped", "preserved", "artifacts-removed", "state-removed"} {
		t.Run("after "+step, func(t *testing.T) {
			s := testStore(t)
			retain(t, s)
			if err := createN1(s); err != nil {
				t.Fatal(err)
			}
			err, hit := destroyN1(t, s, step)
			if step != "" && !hit {
				t.Fatalf("did not crash at %s (err %v)", step, err)
			}
			if err, _ := destroyN1(t, s, ""); err != nil {
				t.Fatalf("resumed destroy: %v", err)
			}
			if got := listDir(t, s.Root.NodeDir("n1")); got != nil {
				t.Fatalf("node dir after destroy = %v", got)
			}
			store := s.Root.RetainedDiskDir("n1", "data")
			if got := strings.Join(listDir(t, store), " "); got != "disk.qcow2 ownership.json" {
				t.Fatalf("store after destroy = %v", got)
			}
			if b, _ := os.ReadFile(filepath.Join(store, disk.RetainedDiskFile)); string(b) != "precious" {
				t.Fatalf("retained disk: %q", b)
			}
			if err := createN1(s); err != nil {
				t.Fatalf("create after destroy: %v", err)
			}
			if b, _ := os.ReadFile(s.Root.NodeFile("n1", "data.qcow2")); string(b) != "precious" {
				t.Fatalf("reattached disk: %q", b)
			}
		})
	}
}

// TestDestroyKeepsWhatIsNotBarns: a file copied over one Barn created
// (a new inode at its name) and a file Barn never recorded are kept; the
// directory stays and the conflict names each with why.
func TestDestroyKeepsWhatIsNotBarns(t *testing.T) {
	s := testStore(t)
	retain(t, s)
	if err := createN1(s); err != nil {
		t.Fatal(err)
	}
	seed := s.Root.NodeFile("n1", state.SeedName)
	if err := os.Remove(seed); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seed, []byte("restored"), 0o600); err != nil {
		t.Fatal(err)
	}
	qemuLog := s.Root.NodeFile("n1", state.QEMULogName)
	if err := os.WriteFile(qemuLog, []byte("operator's"), 0o600); err != nil {
		t.Fatal(err)
	}
	err, _ := destroyN1(t, s, "")
	e := exitcode.As(err)
	if e == nil || e.Reason != "unexpected_files" || !strings.Contains(e.Message, "seed.iso: not the file Barn created") {
		t.Fatalf("err = %v", err)
	}
	if got := listDir(t, s.Root.NodeDir("n1")); !reflect.DeepEqual(got, []string{"qemu.log", "seed.iso"}) {
		t.Fatalf("kept = %v", got)
	}
	if b, _ := os.ReadFile(seed); string(b) != "restored" {
		t.Fatalf("seed changed: %q", b)
	}
}

// TestInvocationRuntimePaths: rollback checks the runtime files the
// journal's own invocation names, whatever this environment's runtime
// directory is.
func TestInvocationRuntimePaths(t *testing.T) {
	args := []string{"-name", "n1", "-qmp", "unix:/run/user/1000/barn/n1/qmp.sock,server=on,wait=off",
		"-chardev", "socket,id=barn-qmp,path=/run/user/1000/barn/n1/barn-qmp.sock,server=on,wait=off", "-mon", "chardev=barn-qmp,mode=control",
		"-pidfile", "/run/user/1000/barn/n1/qemu.pid", "-serial", "file:/x/serial.log"}
	want := []string{"/run/user/1000/barn/n1/qmp.sock", "/run/user/1000/barn/n1/barn-qmp.sock", "/run/user/1000/barn/n1/qemu.pid"}
	if got := InvocationRuntimePaths(args); !reflect.DeepEqual(got, want) {
		t.Errorf("paths = %q, want %q", got, want)
	}
	if got := InvocationRuntimePaths([]string{"-qmp", "tcp:127.0.0.1:4444", "-pidfile"}); len(got) != 0 {
		t.Errorf("non-unix QMP and a dangling flag: %q, want none", got)
	}
}
