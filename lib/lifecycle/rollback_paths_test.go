package lifecycle

import (
	"reflect"
	"testing"
)

// TestInvocationRuntimePaths: rollback checks the runtime files the
// journal's own invocation names, whatever this environment's runtime
// directory is.
func TestInvocationRuntimePaths(t *testing.T) {
	args := []string{"-name", "n1", "-qmp", "unix:/run/user/1000/barn/n1/qmp.sock,server=on,wait=off",
		"-chardev", "socket,id=barn-qmp,path=/run/user/1000/barn/n1/barn-qmp.sock,server=on,wait=off", "-mon", "chardev=barn-qmp,mode=control",
		"-pidfile", "/run/user/1000/barn/n1/qemu.pid", "-serial", "file:/x/serial.log"}
	want := []string{"/run/user/1000/barn/n1/qmp.sock", "/run/user/1000/barn/n1/barn-qmp.sock", "/run/user/1000/barn/n1/qemu.pid"}
	if got := invocationRuntimePaths(args); !reflect.DeepEqual(got, want) {
		t.Errorf("paths = %q, want %q", got, want)
	}
	if got := invocationRuntimePaths([]string{"-qmp", "tcp:127.0.0.1:4444", "-pidfile"}); len(got) != 0 {
		t.Errorf("non-unix QMP and a dangling flag: %q, want none", got)
	}
}

// TestIsOurTemp: Barn's own in-flight temporaries next to allowlisted node
// files are recognised (so a crash mid-write does not block recovery);
// anything else is unexpected.
func TestIsOurTemp(t *testing.T) {
	for name, want := range map[string]bool{
		".seed.iso.tmp-123456":  true,  // cidata.WriteISO
		".root.qcow2.tmp-abc":   true,  // disk creation
		".state.json2718281828": true,  // renameio (lib/state)
		".prepare.json31415":    true,  // renameio (journal)
		".state.json":           false, // no suffix
		".notes.txt.tmp-1":      false, // not a node file
		"seed.iso.tmp-1":        false, // not hidden
		".passwd123":            false,
		".state.jsonx1":         false,
	} {
		if got := isOurTemp(name); got != want {
			t.Errorf("isOurTemp(%q) = %v, want %v", name, got, want)
		}
	}
}
