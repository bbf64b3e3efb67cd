// Package fakeqemu is a fake qemu-system-x86_64 for tests: it parses the
// subset of QEMU's argv that package qemu generates, daemonizes like
// -daemonize (the parent exits 0 only after the daemon wrote its pidfile
// and listens on QMP), writes -pidfile and the -serial file, and serves QMP
// on every monitor: the -qmp unix socket and each -chardev socket that a
// -mon mode=control names. Like QEMU it serves one client per monitor at a
// time and leaves the others queued in a listen backlog of 1 (a third
// client gets EAGAIN). QMP commands: greeting, qmp_capabilities,
// query-name, query-uuid, query-status, system_powerdown (exits), quit
// (exits), stop, cont, the snapshot-save/load/delete jobs on the qcow2
// -blockdev nodes (real qemu-img internal snapshots; see snapshots.go),
// query-jobs and job-dismiss. On a clean exit it removes its sockets and pidfile, as QEMU
// does.
//
// Behaviour switches, comma-separated in FAKEQEMU_MODE:
//
//	ignore-powerdown   system_powerdown is acknowledged and ignored
//	die-at-start       print an error and exit 1 before daemonizing
//	die-after-pidfile  the daemon writes its pidfile, then exits before QMP listens
//	wrong-uuid         query-uuid answers another UUID
//	hang-qmp           every monitor accepts connections and never says anything
//	exit-late          quit/powerdown/SIGTERM exit only after FAKEQEMU_EXIT_DELAY (default 3s)
//	crash-after        the daemon dies by itself FAKEQEMU_EXIT_DELAY after it is ready,
//	                   leaving pidfile and socket behind
//	ignore-term        SIGTERM is ignored (only SIGKILL ends it)
//	crash-at-cpu-plug  a vCPU device_add kills the daemon before it replies
//	                   (a QEMU that dies hot-plugging), leaving pidfile and socket
//	kvm-broken         a smoke start with -accel kvm aborts ("failed to set MSR")
//	no-9p, no-bridge-netdev, no-q35
//	                   -device/-netdev/-machine help leave virtio-9p-pci,
//	                   the bridge netdev or q35 out
//
// It also answers the capability queries `-accel|-machine|-cpu|-device|
// -netdev help` and smoke starts (-S without -daemonize or -pidfile): see
// help.go. With FAKEQEMU_HOSTFWD it serves the management port forward
// (hostfwd.go).
//
// Use from Go tests: in TestMain, `if fakeqemu.Invoked() { os.Exit(fakeqemu.Main(os.Args[1:])) }`,
// then `bin, _ := fakeqemu.Install(t.TempDir())` and run bin (or set
// BARN_QEMU=bin). From testscript: register BinaryName →
// func() int { return fakeqemu.Main(os.Args[1:]) }. The executable is a copy of
// the test binary named qemu-system-x86_64, so /proc/<pid>/exe is stable.
package fakeqemu

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"barn.dev/lib/quote"
)

// BinaryName is the command name the fake answers to.
const BinaryName = "qemu-system-x86_64"

// Version is what `--version` and the QMP greeting report.
const Version = "7.2.0"

// Mode switches (see the package comment).
const (
	IgnorePowerdown = "ignore-powerdown"
	DieAtStart      = "die-at-start"
	DieAfterPidfile = "die-after-pidfile"
	WrongUUID       = "wrong-uuid"
	HangQMP         = "hang-qmp"
	ExitLate        = "exit-late"
	CrashAfter      = "crash-after"
	IgnoreTerm      = "ignore-term"
	CrashAtCPUPlug  = "crash-at-cpu-plug"
)

// WrongUUIDValue is what query-uuid answers in wrong-uuid mode.
const WrongUUIDValue = "00000000-0000-4000-8000-00000000dead"

const childEnv = "FAKEQEMU_DAEMON_CHILD"

// config is the parsed argv.
type config struct {
	name, uuid string
	accel      string
	monitors   []string // unix socket paths of the QMP monitors, in argv order
	pidfile    string
	serial     string // the serial console file
	logfile    string // -D: stderr once daemonized, as QEMU 7.2 does
	daemonize  bool
	paused     bool // -S
	smoke      bool // -S without -daemonize or -pidfile: a capability smoke start
	memMiB     int
	cpus       int      // -smp N
	maxCPUs    int      // -smp maxcpus= (N when absent)
	memSlots   int      // -m slots=
	maxMemMiB  int64    // -m maxmem= (in MiB; memMiB when absent)
	files      []string // disk images that must exist
	// blockNodes maps each qcow2 -blockdev node name to the filename of
	// the file node under it (the images snapshot-save/load/delete act on).
	blockNodes map[string]string
	shareFDs   []int
	hostfwd    string // the management forward's host address, served when fwdTarget is set
	fwdTarget  string // FAKEQEMU_HOSTFWD (hostfwd.go)
	modes      map[string]bool
	exitDelay  time.Duration
}

// valueFlags take one argument; boolFlags take none.
var (
	valueFlags = map[string]bool{
		"-name": true, "-uuid": true, "-machine": true, "-accel": true, "-cpu": true, "-smp": true,
		"-m": true, "-display": true, "-qmp": true, "-pidfile": true, "-serial": true, "-drive": true,
		"-blockdev": true, "-device": true, "-netdev": true, "-fsdev": true, "-chardev": true,
		"-mon": true, "-object": true, "-global": true, "-boot": true, "-D": true,
	}
	boolFlags = map[string]bool{
		"-nodefaults": true, "-no-user-config": true, "-daemonize": true, "-S": true,
		"-no-reboot": true, "-no-shutdown": true,
	}
)

// Main runs the fake with args (argv without argv[0]) and returns its exit
// status. Errors go to stderr prefixed "qemu-system-x86_64: ", like QEMU's.
func Main(args []string) int {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		fmt.Fprintf(os.Stdout, "QEMU emulator version %s (barn fakeqemu)\nCopyright (c) Barn tests\n", Version)
		return 0
	}
	modes := parseModes(os.Getenv("FAKEQEMU_MODE"))
	if helpQuery(args, modes, os.Stdout) {
		return 0
	}
	cfg, err := parse(args, os.Getenv)
	if err != nil {
		return fail(err)
	}
	if cfg.smoke {
		return smoke(cfg)
	}
	if os.Getenv(childEnv) == "" {
		if cfg.modes[DieAtStart] {
			return fail(errors.New("fake: dying at start (FAKEQEMU_MODE=die-at-start)"))
		}
		if err := cfg.check(); err != nil {
			return fail(err)
		}
		if cfg.daemonize {
			return daemonize(cfg)
		}
	}
	return runVM(cfg)
}

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "%s: %v\n", BinaryName, err)
	return 1
}

func parse(args []string, getenv func(string) string) (*config, error) {
	cfg := &config{modes: parseModes(getenv("FAKEQEMU_MODE")), exitDelay: 3 * time.Second}
	sockets := map[string]string{}   // socket chardev id → path
	files := map[string]string{}     // file chardev id → path
	fileNodes := map[string]string{} // -blockdev file node name → filename
	cfg.blockNodes = map[string]string{}
	if d := getenv("FAKEQEMU_EXIT_DELAY"); d != "" {
		v, err := time.ParseDuration(d)
		if err != nil {
			return nil, fmt.Errorf("FAKEQEMU_EXIT_DELAY=%q: %v", d, err)
		}
		cfg.exitDelay = v
	}
	for i := 0; i < len(args); i++ {
		flag := args[i]
		if boolFlags[flag] {
			switch flag {
			case "-daemonize":
				cfg.daemonize = true
			case "-S":
				cfg.paused = true
			}
			continue
		}
		if !valueFlags[flag] {
			return nil, fmt.Errorf("%s: invalid option", flag)
		}
		if i+1 >= len(args) {
			return nil, fmt.Errorf("%s: requires an argument", flag)
		}
		i++
		v := args[i]
		opts := quote.SplitQEMUOpts(v)
		switch flag {
		case "-name":
			cfg.name = opts[0]
			for _, o := range opts {
				if g, ok := strings.CutPrefix(o, "guest="); ok {
					cfg.name = g
				}
			}
		case "-uuid":
			cfg.uuid = v
		case "-accel":
			cfg.accel = v
		case "-m":
			n, err := strconv.Atoi(strings.TrimSuffix(opts[0], "M"))
			if err != nil || n < 1 {
				return nil, fmt.Errorf("-m %s: invalid RAM size", v)
			}
			cfg.memMiB, cfg.maxMemMiB = n, int64(n)
			if s := optValue(opts, "slots"); s != "" {
				if cfg.memSlots, err = strconv.Atoi(s); err != nil {
					return nil, fmt.Errorf("-m %s: invalid slots", v)
				}
				mm, err := strconv.ParseInt(strings.TrimSuffix(optValue(opts, "maxmem"), "M"), 10, 64)
				if err != nil || mm < int64(n) {
					return nil, fmt.Errorf("-m %s: invalid maxmem (the fake wants <MiB>M)", v)
				}
				cfg.maxMemMiB = mm
			}
		case "-smp":
			n, err := strconv.Atoi(opts[0])
			if err != nil || n < 1 {
				return nil, fmt.Errorf("-smp %s: invalid CPU count", v)
			}
			cfg.cpus, cfg.maxCPUs = n, n
			if m := optValue(opts, "maxcpus"); m != "" {
				if cfg.maxCPUs, err = strconv.Atoi(m); err != nil || cfg.maxCPUs < n {
					return nil, fmt.Errorf("-smp %s: invalid maxcpus", v)
				}
			}
		case "-qmp":
			p, ok := strings.CutPrefix(opts[0], "unix:")
			if !ok {
				return nil, fmt.Errorf("-qmp %s: the fake serves unix sockets only", v)
			}
			cfg.monitors = append(cfg.monitors, p)
		case "-chardev":
			id, path := optValue(opts, "id"), optValue(opts, "path")
			if id == "" || path == "" || opts[0] != "socket" && opts[0] != "file" {
				return nil, fmt.Errorf("-chardev %s: the fake wants socket or file chardevs with id= and path=", v)
			}
			if opts[0] == "socket" {
				sockets[id] = path
			} else {
				files[id] = path
			}
		case "-mon":
			path, ok := sockets[optValue(opts, "chardev")]
			if !ok || optValue(opts, "mode") != "control" {
				return nil, fmt.Errorf("-mon %s: the fake serves mode=control monitors on an earlier socket -chardev", v)
			}
			cfg.monitors = append(cfg.monitors, path)
		case "-pidfile":
			cfg.pidfile = v
		case "-D":
			cfg.logfile = v // taken literally
		case "-serial":
			if p, ok := strings.CutPrefix(v, "file:"); ok {
				cfg.serial = p // QEMU takes the rest literally
				break
			}
			id, ok := strings.CutPrefix(v, "chardev:")
			if !ok {
				return nil, fmt.Errorf("-serial %s: the fake writes files only", v)
			}
			p, ok := files[id]
			if !ok {
				return nil, fmt.Errorf("-serial %s: chardev '%s' not found", v, id)
			}
			cfg.serial = p
		case "-blockdev":
			if strings.HasPrefix(v, "{") {
				var b map[string]any
				if err := json.Unmarshal([]byte(v), &b); err != nil {
					return nil, fmt.Errorf("-blockdev %s: %v", v, err)
				}
				name, _ := b["node-name"].(string)
				switch b["driver"] {
				case "file":
					f, _ := b["filename"].(string)
					cfg.files = append(cfg.files, f)
					fileNodes[name] = f
				case "qcow2":
					under, _ := b["file"].(string)
					cfg.blockNodes[name] = fileNodes[under]
				}
			}
		case "-drive":
			for _, o := range opts {
				if f, ok := strings.CutPrefix(o, "file="); ok {
					cfg.files = append(cfg.files, f)
				}
			}
		case "-netdev":
			if a := hostfwdAddr(opts); a != "" && getenv(HostFwdEnv) != "" {
				cfg.hostfwd, cfg.fwdTarget = a, getenv(HostFwdEnv)
			}
		case "-fsdev":
			for _, o := range opts {
				if p, ok := strings.CutPrefix(o, "path=/proc/self/fd/"); ok {
					fd, err := strconv.Atoi(p)
					if err != nil {
						return nil, fmt.Errorf("-fsdev %s: bad fd path", v)
					}
					cfg.shareFDs = append(cfg.shareFDs, fd)
				}
			}
		}
	}
	if cfg.paused && !cfg.daemonize && cfg.pidfile == "" && len(cfg.monitors) <= 1 {
		cfg.smoke = true // no VM of Barn's runs without -daemonize and -pidfile
		return cfg, nil
	}
	if len(cfg.monitors) == 0 {
		return nil, errors.New("fake: a QMP monitor is required (-qmp unix:<path>,server=on,wait=off, or -chardev socket + -mon mode=control), or -S alone: a smoke start")
	}
	return cfg, nil
}

func parseModes(list string) map[string]bool {
	modes := map[string]bool{}
	for _, m := range strings.Split(list, ",") {
		if m = strings.TrimSpace(m); m != "" {
			modes[m] = true
		}
	}
	return modes
}

// check does what QEMU checks before daemonizing: images open, share
// descriptors are directories.
func (c *config) check() error {
	for _, f := range c.files {
		fh, err := os.Open(f)
		if err != nil {
			return fmt.Errorf("Could not open '%s': %v", f, errors.Unwrap(err))
		}
		fh.Close()
	}
	for _, fd := range c.shareFDs {
		fi, err := os.Stat("/proc/self/fd/" + strconv.Itoa(fd))
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("-fsdev path=/proc/self/fd/%d: not an open directory descriptor", fd)
		}
	}
	if c.serial != "" && !filepath.IsAbs(c.serial) {
		return fmt.Errorf("-serial %s: the fake wants absolute paths", c.serial)
	}
	return nil
}

// optValue returns the value of key=value among opts ("" when absent).
func optValue(opts []string, key string) string {
	for _, o := range opts {
		if v, ok := strings.CutPrefix(o, key+"="); ok {
			return v
		}
	}
	return ""
}

// Invoked reports whether this process was started as the fake (argv[0]'s
// base name is BinaryName).
func Invoked() bool { return filepath.Base(os.Args[0]) == BinaryName }

// Install puts a copy of the running executable named BinaryName into dir
// (a hard link when possible) and returns its path. Run it with the test
// binary's TestMain dispatching on Invoked.
func Install(dir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, BinaryName)
	if err := os.Link(self, dst); err == nil {
		return dst, nil
	}
	in, err := os.Open(self)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", err
	}
	return dst, out.Close()
}
