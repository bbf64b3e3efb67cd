package qemu

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestKVMSmoke: a QEMU that aborts at once (as on a host whose /dev/kvm
// cannot set up a vCPU) is not usable; one that stays up paused is.
func TestKVMSmoke(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	aborts := write("aborts", `echo "failed to set MSR 0x10a" >&2; exit 134`)
	stays := write("stays", `exec sleep 5`)
	if kvmSmoke(aborts, 2*time.Second) {
		t.Error("a QEMU that aborts was judged usable")
	}
	start := time.Now()
	if !kvmSmoke(stays, 200*time.Millisecond) {
		t.Error("a QEMU that stays up was judged unusable")
	}
	if time.Since(start) > 3*time.Second {
		t.Error("the smoke did not kill the paused QEMU promptly")
	}
	if kvmSmoke(filepath.Join(dir, "missing"), time.Second) {
		t.Error("a missing binary was judged usable")
	}
}
