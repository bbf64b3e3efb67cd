package vm_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"barn.dev/lib/fakeqemu"
	"barn.dev/lib/procid"
	"barn.dev/lib/vm"
)

// TestVanishedSocketDuringStopIsNotAStop: an interrupted start (no tuple
// recorded), a guest that ignores the powerdown, and the runtime directory
// wiped while Stop waits for the guest. The socket that stops answering is
// no proof the VM is gone: the wait goes on while the process table shows
// the node's QEMU, then the ladder adopts it from the table and ends it
// with verified signals; Stop reports stopped only once it is dead.
func TestVanishedSocketDuringStopIsNotAStop(t *testing.T) {
	f := newFixture(t, fakeBin)
	proc := startDirect(t, f, fakeqemu.IgnorePowerdown)
	wiped := make(chan error, 1)
	o := quick()
	o.Graceful = 2 * time.Second
	log := steps(&o)
	progress := o.Progress
	o.Progress = func(s string) {
		progress(s)
		if strings.Contains(s, "system_powerdown") {
			// Stop has sent the powerdown and now waits: the directory
			// goes while it waits.
			go func() { wiped <- os.RemoveAll(f.rt.Directory) }()
		}
	}
	err := vm.Stop(context.Background(), f.target(nil), o)
	if werr := <-wiped; werr != nil {
		t.Fatal(werr)
	}
	if v := procid.Observe(proc); err == nil && v != procid.Dead {
		t.Fatalf("Stop reported the VM stopped while its QEMU (pid %d) is %s; steps:\n%s", proc.PID, v, strings.Join(*log, "\n"))
	}
	if err != nil {
		t.Fatalf("stop: %v, want the QEMU found in the process table and stopped", err)
	}
	if got := strings.Join(*log, "\n"); !strings.Contains(got, "process table shows pid") || !strings.Contains(got, "SIGTERM") {
		t.Errorf("ladder steps:\n%s", got)
	}
}

// TestLaunchCompensationWithoutPidfileAsksTheProcessTable: a launch whose
// monitor never answers and whose runtime directory (pidfile included)
// vanishes before the compensation runs. A missing pidfile is no proof
// that nothing was daemonized: the compensation finds the launched QEMU in
// the process table and ends it.
func TestLaunchCompensationWithoutPidfileAsksTheProcessTable(t *testing.T) {
	f := newFixture(t, fakeBin)
	go func() {
		for i := 0; i < 200; i++ {
			if _, err := os.Stat(f.rt.Pidfile); err == nil {
				os.RemoveAll(f.rt.Directory)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	_, err := vm.LaunchWith(context.Background(), f.inv, f.node, f.uuid, f.rt,
		vm.LaunchOptions{Env: fakeEnv(fakeqemu.HangQMP), QMPWait: 1500 * time.Millisecond, QMPTimeout: 300 * time.Millisecond})
	if err == nil {
		t.Fatal("launch with a silent monitor succeeded")
	}
	tab, ferr := procid.Find(procid.Claim{UUID: f.uuid}, f.inv)
	if ferr != nil {
		t.Fatal(ferr)
	}
	for _, m := range tab.Matches {
		if m.Process != nil {
			t.Cleanup(func() { killIfOurs(*m.Process) })
		}
	}
	if !tab.Absent() {
		t.Fatalf("after the failed launch (%v) the process table still shows %v claiming the node: the compensation left its QEMU running", err, tab.PIDs())
	}
}
