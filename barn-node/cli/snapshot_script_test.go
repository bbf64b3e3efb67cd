package cli_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/lib/qemu"
	"barn.dev/lib/qmp"
	"barn.dev/lib/scripttest"
	"barn.dev/lib/state"
)

// TestSnapshotScripts runs the whole-lab snapshot suites (testdata/snapshot)
// on the fake QEMU, whose snapshot jobs act on the real qcow2 images with
// qemu-img; the scripts read and write guest data with qemu-io.
func TestSnapshotScripts(t *testing.T) {
	p := params("testdata/snapshot")
	p.Cmds["qmpstatus"] = cmdQMPStatus
	scripttest.Run(t, p)
}

// TestSnapshotRealQEMU runs testdata/snapshot-real against the real
// qemu-system-x86_64 under TCG and the distro's OVMF. It skips only when
// QEMU or OVMF is not installed.
func TestSnapshotRealQEMU(t *testing.T) {
	bin, err := exec.LookPath("/usr/bin/qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 is not installed: ", err)
	}
	if _, err := qemu.FindFirmware(qemu.FirmwarePairs); err != nil {
		t.Skip("no OVMF firmware: ", err)
	}
	p := params("testdata/snapshot-real")
	p.Cmds["qmpstatus"] = cmdQMPStatus
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		env.Setenv("BARN_QEMU", bin)
		return nil
	}
	scripttest.Run(t, p)
}

// qmpstatus NODE STATUS: NODE's QEMU (the operators' QMP monitor) reports
// run state STATUS (running, paused, …).
func cmdQMPStatus(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: qmpstatus NODE STATUS")
	}
	root, err := state.Open(ts.Getenv)
	ts.Check(err)
	n, err := root.ReadNode(args[0])
	ts.Check(err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var st struct {
		Status string `json:"status"`
	}
	ts.Check(qmp.Monitor{Socket: n.Runtime.QMP}.Execute(ctx, "query-status", nil, &st))
	if (st.Status == args[1]) == neg {
		b, _ := json.Marshal(st)
		ts.Fatalf("%s: query-status %s", args[0], b)
	}
}
