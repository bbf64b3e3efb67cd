package qemu

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"barn.dev/lib/qmp"
)

// Smoke is the outcome of a real smoke start of QEMU: whether the
// accelerator could be set up, and what was observed.
type Smoke struct {
	OK bool
	// Evidence says what happened, e.g. "qemu-system-x86_64 -accel kvm
	// exited after 14ms (exit status 1): failed to set MSR 0x10a" or
	// "/dev/kvm: permission denied".
	Evidence string
}

// SmokePoll is how often SmokeStart looks for the smoke start's QMP
// socket while QEMU sets the machine up.
const SmokePoll = 20 * time.Millisecond

// SmokeStart starts bin paused (-S) on q35 with accel ("kvm" or "tcg") and
// the CPU model Barn uses with it (host for KVM, max for TCG), no devices,
// no display, and one QMP monitor on a socket in a private temporary
// directory. QEMU serves QMP commands only from its main loop, after the
// accelerator and the vCPUs are set up: a query-status answer is the
// proof that accel works (QEMU is then killed). A QEMU that exits first
// could not set it up, and its stderr (at most 512 bytes) is the
// evidence. ctx bounds the whole start; no verdict depends on how fast
// the host is.
func SmokeStart(ctx context.Context, bin, accel string) Smoke {
	cpu := "max"
	if accel == AccelKVM {
		cpu = "host"
	}
	return smokeStart(ctx, bin, accel, "q35", cpu)
}

// SmokeForeign is SmokeStart of a foreign guest's emulator as Barn runs
// it: TCG (multi- or single-threaded by TCGThreads), t's machine and CPU
// ForeignCPU, paused. An answer to query-status proves the emulator can
// set that machine up on this host.
func SmokeForeign(ctx context.Context, bin string, t Target) Smoke {
	return smokeStart(ctx, bin, "tcg,thread="+TCGThreads(t.Arch, HostArch()), t.Machine, ForeignCPU)
}

func smokeStart(ctx context.Context, bin, accel, machine, cpu string) Smoke {
	what := fmt.Sprintf("%s -accel %s -cpu %s -S", bin, accel, cpu)
	if machine != "q35" {
		what = fmt.Sprintf("%s -machine %s -accel %s -cpu %s -S", bin, machine, accel, cpu)
	}
	dir, err := os.MkdirTemp("", "barn-smoke-")
	if err != nil {
		return Smoke{Evidence: fmt.Sprintf("%s: %v", what, err)}
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "qmp.sock")
	args := []string{"-accel", accel, "-machine", machine, "-cpu", cpu,
		"-display", "none", "-nodefaults", "-no-user-config", "-S",
		"-qmp", "unix:" + sock + ",server=on,wait=off"}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &limitedWriter{w: &stderr, n: 512}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return Smoke{Evidence: fmt.Sprintf("%s: %v", what, err)}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answered := make(chan struct{})
	go func() {
		if smokeAnswers(qctx, sock) {
			close(answered)
		}
	}()
	select {
	case err := <-done:
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = "no message"
		}
		status := "exit status 0"
		if err != nil {
			status = err.Error()
		}
		return Smoke{Evidence: fmt.Sprintf("%s exited after %s (%s): %s", what, time.Since(began).Round(time.Millisecond), status, firstLine(msg))}
	case <-answered:
		_ = cmd.Process.Kill()
		<-done
		return Smoke{OK: true, Evidence: fmt.Sprintf("%s set the machine up and answered QMP query-status after %s (then stopped)", what, time.Since(began).Round(time.Millisecond))}
	}
}

// smokeAnswers reports whether the QMP monitor at sock answers
// query-status before ctx ends, retrying every SmokePoll while the socket
// is not there yet.
func smokeAnswers(ctx context.Context, sock string) bool {
	t := time.NewTicker(SmokePoll)
	defer t.Stop()
	for {
		if s, err := (qmp.Monitor{Socket: sock}).Open(ctx); err == nil {
			var st struct {
				Status string `json:"status"`
			}
			err = s.Execute("query-status", nil, &st)
			s.Close()
			if err == nil && st.Status != "" {
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// OpenKVM checks that dev (normally /dev/kvm) opens read-write.
func OpenKVM(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

// KVMDevice is the KVM device node.
const KVMDevice = "/dev/kvm"

// probeKVM decides whether KVM is usable on this host: /dev/kvm opens
// read-write and, when qemu-system-x86_64 is installed, a real smoke start
// with KVM stays up (some hosts expose a /dev/kvm that QEMU aborts on,
// "failed to set MSR", which only a smoke start shows).
func probeKVM() Smoke {
	if err := OpenKVM(KVMDevice); err != nil {
		return Smoke{Evidence: err.Error()}
	}
	bin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return Smoke{OK: true, Evidence: KVMDevice + " opens read-write; no qemu-system-x86_64 to smoke-test with"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return SmokeStart(ctx, bin, AccelKVM)
}

// kvmUsable is probeKVM computed once per process. A variable so tests can
// pin the host's answer.
var kvmUsable = sync.OnceValue(probeKVM)

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// limitedWriter keeps the first n bytes written and discards the rest
// (never failing, so the child never sees a broken pipe).
type limitedWriter struct {
	w *bytes.Buffer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if room := l.n - l.w.Len(); room > 0 {
		if len(p) < room {
			room = len(p)
		}
		l.w.Write(p[:room])
	}
	return len(p), nil
}
