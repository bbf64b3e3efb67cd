package cli_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/barn-plan/cli"
	"barn.dev/lib/fileid"
	"barn.dev/lib/imageref"
	"barn.dev/lib/inventory"
	"barn.dev/lib/procid"
	"barn.dev/lib/scripttest"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
	"barn.dev/lib/vmrecord"
	"barn.dev/lib/wire"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"barn-plan": scripttest.Command(cli.Main),
	})
}

// TestScripts runs testdata/script/*.txtar. BARN_UPDATE=1 rewrites the
// golden sections.
func TestScripts(t *testing.T) {
	scripttest.Run(t, scripttest.Configure(testscript.Params{
		Dir: "testdata/script",
		Cmds: map[string]func(*testscript.TestScript, bool, []string){
			"resolve":  cmdResolve,
			"commit":   cmdCommit,
			"holdlock": cmdHoldLock,
		},
		Setup: func(env *testscript.Env) error {
			env.Setenv("BARN_HOME", env.WorkDir+"/.barn")
			env.Setenv("BARN_ACCEL", "tcg")
			run, err := os.MkdirTemp("", "bp")
			if err != nil {
				return err
			}
			env.Defer(func() { os.RemoveAll(run) })
			env.Setenv("BARN_RUNTIME_DIR", run)
			return nil
		},
	}))
}

// exits CODE PROG ARGS...: PROG must exit with exactly CODE; its stdout
// and stderr are kept for the following stdout/stderr checks.

// resolve INVENTORY OUT: resolves a Pigsty inventory with lib/inventory
// (what `barn-inventory resolve` does) and writes the barn.spec/v1 to OUT.
func cmdResolve(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: resolve INVENTORY OUT")
	}
	data, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	s, _, err := inventory.Resolve(data, args[0])
	ts.Check(err)
	out, err := wire.Marshal(s)
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), append(out, '\n'), 0o644))
}

// commit [flags] SPEC: writes, through lib/state, the deployment state and
// node states an apply of SPEC would leave. Nodes are stopped unless
// listed: -live N,... run (a real `sleep` whose identity tuple is
// recorded, so the read-only audit proves it alive; killed at the end of
// the script); -dead N,... are recorded running but their process is gone.
// -accel sets the recorded accelerator, -only restricts the node states
// written, -no-deployment skips state.json.
func cmdCommit(ts *testscript.TestScript, neg bool, args []string) {
	fs := flag.NewFlagSet("commit", flag.ContinueOnError)
	live := fs.String("live", "", "nodes whose VM runs")
	dead := fs.String("dead", "", "nodes recorded running whose process is gone")
	accel := fs.String("accel", "tcg", "recorded accelerator")
	only := fs.String("only", "", "write only these node states")
	noDeployment := fs.Bool("no-deployment", false, "write no deployment state")
	if neg || fs.Parse(args) != nil || fs.NArg() != 1 {
		ts.Fatalf("usage: commit [-live N,..] [-dead N,..] [-accel A] [-only N,..] [-no-deployment] SPEC")
	}
	data, err := os.ReadFile(ts.MkAbs(fs.Arg(0)))
	ts.Check(err)
	var s spec.Spec
	ts.Check(wire.DecodeStrict(data, &s))
	root, err := state.Open(ts.Getenv)
	ts.Check(err)
	if !*noDeployment {
		ts.Check(root.WriteDeployment(&state.Deployment{Generation: 1, Spec: s}))
	}
	in := func(list, name string) bool { return list != "" && strings.Contains(","+list+",", ","+name+",") }
	created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, n := range s.Nodes {
		if *only != "" && !in(*only, n.Name) {
			continue
		}
		_, err := root.EnsureNodeDir(n.Name)
		ts.Check(err)
		rt, err := root.NodeRuntime(n.Name)
		ts.Check(err)
		st := &state.Node{Schema: state.NodeSchema, Node: n.Name,
			VMUUID: fmt.Sprintf("6f1c2a1e-0000-4000-8000-%012d", i+1),
			Phase:  state.Stopped, Generation: 1, SpecHash: n.SpecHash, Spec: n,
			Image: imageref.Identity{Selector: n.Image, Image: "d12", Version: "12.13", Arch: "amd64",
				File: "images/d12-12.13-amd64.qcow2", SizeBytes: 1 << 20, SHA256: strings.Repeat("ab", 32),
				VirtualSize: 3 << 30, Boot: "uefi", SourceUser: "debian", Status: "supported"}, // uefi like the official catalog's images
			RootDisk: root.NodeFile(n.Name, state.RootDiskName), Seed: root.NodeFile(n.Name, state.SeedName),
			SerialLog: root.NodeFile(n.Name, state.SerialLogName), DataDisks: []vmrecord.DataDisk{}, SSHPort: 2222 + i, Accel: *accel, Runtime: rt,
			Invocation: vmrecord.Invocation{Binary: "/usr/bin/qemu-system-x86_64", Args: []string{"-name", n.Name},
				InheritedFiles: []vmrecord.InheritedFile{}},
			CreatedAt: created, UpdatedAt: created,
			Files: map[string]fileid.ID{state.RootDiskName: {Device: 2049, Inode: 11}, state.SeedName: {Device: 2049, Inode: 12},
				state.SerialLogName: {Device: 2049, Inode: 10}}}
		for j, d := range n.Disks {
			st.Files[state.DataDiskFileName(d.Name)] = fileid.ID{Device: 2049, Inode: uint64(13 + j)}
			st.DataDisks = append(st.DataDisks, vmrecord.DataDisk{Name: d.Name, Path: root.NodeFile(n.Name, state.DataDiskFileName(d.Name)),
				Serial: d.Serial, SizeBytes: d.SizeBytes, Mount: d.Mount, Persistent: d.Persistent,
				RequestedFilesystem: d.FS, ActualFilesystem: "xfs"})
		}
		switch {
		case in(*live, n.Name):
			st.Phase = state.Running
			st.Process = spawnSleep(ts, true)
		case in(*dead, n.Name):
			st.Phase = state.Running
			st.Process = spawnSleep(ts, false)
		}
		if st.Process != nil {
			// the recorded invocation is what the recorded process runs: a
			// tuple is a node's QEMU only when it runs the invocation's binary
			st.Invocation.Binary, st.Invocation.Args = st.Process.Executable, []string{"120"}
		}
		ts.Check(root.WriteNode(st))
	}
}

// spawnSleep starts a real process and returns its identity tuple. With
// keep it runs until the script ends; otherwise it is killed and reaped
// at once, leaving a tuple whose process is gone.
func spawnSleep(ts *testscript.TestScript, keep bool) *vmrecord.Process {
	bin, err := exec.LookPath("sleep")
	ts.Check(err)
	bin, err = filepath.EvalSymlinks(bin)
	ts.Check(err)
	cmd := exec.Command(bin, "120")
	ts.Check(cmd.Start())
	// Capture only once the child has fully exec'ed sleep: right after
	// fork /proc still shows this test binary, and mid-exec the new
	// cmdline can still be empty.
	want := procid.ArgvHash(vmrecord.Invocation{Binary: bin, Args: []string{"120"}})
	var p vmrecord.Process
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		p, err = procid.Capture(cmd.Process.Pid)
		ts.Check(err)
		if p.Executable == bin && p.ArgvHash == want {
			break
		}
		if time.Now().After(deadline) {
			ts.Fatalf("sleep (pid %d) did not exec %s: exe %s", cmd.Process.Pid, bin, p.Executable)
		}
	}
	if keep {
		ts.Defer(func() { cmd.Process.Kill(); cmd.Wait() })
	} else {
		cmd.Process.Kill()
		cmd.Wait()
	}
	return &p
}

// holdlock COMMAND: takes the deployment lock (without waiting) as
// COMMAND would, and keeps it until the script ends.
func cmdHoldLock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: holdlock COMMAND")
	}
	root, err := state.Open(ts.Getenv)
	ts.Check(err)
	l, err := root.LockDeployment(context.Background(), args[0], false, nil)
	ts.Check(err)
	ts.Defer(func() { l.Unlock() })
}
