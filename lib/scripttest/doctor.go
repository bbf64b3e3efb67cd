package scripttest

import (
	"io/fs"
	"os/exec"
	"strings"

	"barn.dev/lib/doctor"
)

// Environment of DoctorHost, read only by test binaries (barn-node's
// cli.DoctorHook):
//
//	BARN_TEST_KVM=open|absent   /dev/kvm opens (the fake QEMU's smoke then
//	                            decides, FAKEQEMU_MODE=kvm-broken) or does not exist
//	BARN_TEST_MISSING=a,b       these programs are not on PATH
const (
	EnvKVM     = "BARN_TEST_KVM"
	EnvMissing = "BARN_TEST_MISSING"
)

// DoctorHost replaces the host facts a script cannot control: whether
// /dev/kvm opens, and which programs are missing.
func DoctorHost(getenv func(string) string, p *doctor.Probe) {
	switch getenv(EnvKVM) {
	case "open":
		p.OpenKVM = func() error { return nil }
	case "absent":
		p.OpenKVM = func() error { return &fs.PathError{Op: "open", Path: "/dev/kvm", Err: fs.ErrNotExist} }
	}
	missing := map[string]bool{}
	for _, m := range strings.Split(getenv(EnvMissing), ",") {
		if m != "" {
			missing[m] = true
		}
	}
	p.LookPath = func(name string) (string, error) {
		if missing[name] {
			return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
		}
		return exec.LookPath(name)
	}
}
