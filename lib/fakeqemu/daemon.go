package fakeqemu

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

const readyFDEnv = "FAKEQEMU_READY_FD"

// daemonize re-executes this program detached (new session) with the exact
// original argv, so /proc/<pid>/cmdline of the daemon equals the command
// line that was run, and exits 0 once the daemon reports ready — or 1 when
// it dies first (its stderr reaches ours until then).
func daemonize(cfg *config) int {
	argv, err := selfArgv()
	if err != nil {
		return fail(err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	// Inherited share descriptors keep their numbers: ExtraFiles[i] is fd 3+i.
	maxFD := 2
	for _, fd := range cfg.shareFDs {
		maxFD = max(maxFD, fd)
	}
	var extra []*os.File
	for fd := 3; fd <= maxFD; fd++ {
		f := os.NewFile(uintptr(fd), "inherited-"+strconv.Itoa(fd))
		if _, err := f.Stat(); err != nil {
			f = nil // not open: leave the slot closed
		}
		extra = append(extra, f)
	}
	extra = append(extra, w)
	readyFD := 3 + len(extra) - 1

	cmd := &exec.Cmd{
		Path:        exe,
		Args:        argv,
		Env:         append(os.Environ(), childEnv+"=1", readyFDEnv+"="+strconv.Itoa(readyFD)),
		Stderr:      os.Stderr,
		ExtraFiles:  extra,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	w.Close()
	line, _ := bufio.NewReader(r).ReadString('\n')
	if line == "ready\n" {
		cmd.Process.Release()
		return 0
	}
	cmd.Wait()
	return 1
}

// selfArgv returns this process's exact argv from /proc/self/cmdline
// (os.Args[0] may have been rewritten by a test harness).
func selfArgv() ([]string, error) {
	b, err := os.ReadFile("/proc/self/cmdline")
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSuffix(b, []byte{0})
	var out []string
	for _, a := range bytes.Split(b, []byte{0}) {
		out = append(out, string(a))
	}
	return out, nil
}

// vm is the running fake machine.
type vm struct {
	cfg     *config
	lns     []net.Listener // one per monitor
	tcp     net.Listener   // the management port forward (hostfwd.go); nil when not served
	once    sync.Once
	exiting chan int
	run     runState // QMP stop/cont and snapshot jobs (snapshots.go)
}

func runVM(cfg *config) int {
	v := &vm{cfg: cfg, exiting: make(chan int, 1)}
	signal.Ignore(syscall.SIGHUP)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	if cfg.pidfile != "" {
		if err := os.WriteFile(cfg.pidfile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
			return fail(fmt.Errorf("cannot create PID file: %v", err))
		}
	}
	if cfg.modes[DieAfterPidfile] {
		return fail(errors.New("fake: dying after writing the pidfile (FAKEQEMU_MODE=die-after-pidfile)"))
	}
	if cfg.serial != "" {
		msg := fmt.Sprintf("fakeqemu: %s (%s) booting, %d MiB\n", cfg.name, cfg.uuid, cfg.memMiB)
		if err := os.WriteFile(cfg.serial, []byte(msg), 0o600); err != nil {
			v.cleanup()
			return fail(fmt.Errorf("could not open serial file: %v", err))
		}
	}
	for _, path := range cfg.monitors {
		ln, err := listenLikeQEMU(path)
		if err != nil {
			v.cleanup()
			return fail(fmt.Errorf("monitor unix:%s: %v", path, err))
		}
		v.lns = append(v.lns, ln)
		go v.serve(ln)
	}
	if cfg.fwdTarget != "" {
		if err := v.serveHostFwd(); err != nil {
			v.cleanup()
			return fail(err)
		}
	}

	if fdStr := os.Getenv(readyFDEnv); fdStr != "" {
		fd, _ := strconv.Atoi(fdStr)
		ready := os.NewFile(uintptr(fd), "ready")
		ready.Write([]byte("ready\n"))
		ready.Close()
		detachStdio(cfg.logfile)
	}
	if cfg.modes[CrashAfter] {
		go func() {
			time.Sleep(cfg.exitDelay)
			v.exiting <- 9 // a crash: no cleanup
		}()
	}

	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGTERM && cfg.modes[IgnoreTerm] {
				continue
			}
			v.shutdown()
		case code := <-v.exiting:
			if code != 9 {
				v.cleanup()
			}
			return code
		}
	}
}

// shutdown makes the VM exit (after exitDelay in exit-late mode).
func (v *vm) shutdown() {
	v.once.Do(func() {
		go func() {
			if v.cfg.modes[ExitLate] {
				time.Sleep(v.cfg.exitDelay)
			} else {
				time.Sleep(20 * time.Millisecond) // let the reply reach the client
			}
			v.exiting <- 0
		}()
	})
}

func (v *vm) cleanup() {
	for _, ln := range v.lns {
		ln.Close()
	}
	if v.tcp != nil {
		v.tcp.Close()
	}
	for _, path := range v.cfg.monitors {
		os.Remove(path)
	}
	if v.cfg.pidfile != "" {
		os.Remove(v.cfg.pidfile)
	}
}

// listenLikeQEMU binds a unix socket at path as QEMU's chardev does:
// a stale path is unlinked first and listen(2) gets a backlog of 1.
func listenLikeQEMU(path string) (net.Listener, error) {
	os.Remove(path)
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(fd) // not atomic (macOS has no SOCK_CLOEXEC); the fake runs no exec concurrently
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		return nil, err
	}
	if err := syscall.Listen(fd, 1); err != nil {
		return nil, err
	}
	return net.FileListener(f)
}

// detachStdio points 0, 1 and 2 at /dev/null, as QEMU does once
// daemonized; with -D (logfile not ""), 2 goes to that file instead,
// opened as QEMU's fopen "w" does (created 0644 less umask, truncated).
func detachStdio(logfile string) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return
	}
	for fd := 0; fd <= 2; fd++ {
		syscall.Dup2(int(null.Fd()), fd)
	}
	null.Close()
	if logfile == "" {
		return
	}
	if f, err := os.OpenFile(logfile, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644); err == nil {
		syscall.Dup2(int(f.Fd()), 2)
		f.Close()
	}
}
