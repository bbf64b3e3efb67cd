package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/barn-state/cli"
	"barn.dev/lib/fileid"
	"barn.dev/lib/imageref"
	"barn.dev/lib/scripttest"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
	"barn.dev/lib/vmrecord"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"barn-state": scripttest.Command(cli.Main),
		// holdlock COMMAND: take the deployment lock as COMMAND, create
		// $WORK/locked, then sleep until killed.
		"holdlock": func() {
			r, err := state.Open(os.Getenv)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			if _, err := r.LockDeployment(context.Background(), strings.Join(os.Args[1:], " "), false, nil); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			_ = os.WriteFile(os.Getenv("WORK")+"/locked", nil, 0o600)
			time.Sleep(time.Minute)
		},
	})
}

func TestScripts(t *testing.T) {
	scripttest.Run(t, scripttest.Configure(testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("BARN_HOME", env.WorkDir+"/.barn")
			env.Setenv("BARN_RUNTIME_DIR", env.WorkDir+"/run")
			env.Setenv("TZ", "UTC")
			return nil
		},
		Cmds: map[string]func(*testscript.TestScript, bool, []string){
			"fixture":  cmdFixture,
			"jsonset":  cmdJSONSet,
			"waitfile": cmdWaitFile,
		},
	}))
}

// cmdFixture writes valid state through lib/state with a fixed clock:
//
//	fixture deployment NODE...  deployment state.json + a stopped node state per NODE
//	fixture journal NODE        an in-progress prepare journal for NODE
//	fixture event NODE ACTION MESSAGE...
func cmdFixture(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: fixture deployment|journal|event ARGS...")
	}
	r, err := state.Open(ts.Getenv)
	ts.Check(err)
	fixed := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	r.Now = func() time.Time { return fixed }
	switch args[0] {
	case "deployment":
		s := fixtureSpec(args[1:])
		ts.Check(r.WriteDeployment(&state.Deployment{Generation: 1, Spec: s}))
		for _, n := range s.Nodes {
			rt, err := r.NodeRuntime(n.Name)
			ts.Check(err)
			ts.Check(r.WriteNode(&state.Node{
				Node: n.Name, VMUUID: fixtureUUID(n.Name), Phase: state.Stopped, Generation: 1, SpecHash: n.SpecHash, Spec: n,
				Image:    imageref.Identity{Selector: "d12:stable", Image: "d12", Version: "12.13", Arch: "amd64"},
				RootDisk: r.NodeFile(n.Name, state.RootDiskName), Seed: r.NodeFile(n.Name, state.SeedName), SerialLog: r.NodeFile(n.Name, state.SerialLogName),
				SSHPort: 2222, Accel: "tcg", Runtime: rt, Invocation: vmrecord.Invocation{Binary: "/usr/bin/qemu-system-x86_64"},
				Files: map[string]fileid.ID{state.RootDiskName: {Device: 2049, Inode: 11}, state.SeedName: {Device: 2049, Inode: 12},
					state.SerialLogName: {Device: 2049, Inode: 10}},
			}))
		}
	case "journal":
		if len(args) != 2 {
			ts.Fatalf("usage: fixture journal NODE")
		}
		node := args[1]
		ts.Check(r.WriteJournal(&state.Journal{
			OperationID: "6f1c1a52-31c4-4f44-a1e5-1d0c6f0e9a11", Node: node, VMUUID: fixtureUUID(node),
			SpecHash:  strings.Repeat("ab", 32),
			Completed: []state.Artifact{{Kind: state.RootOverlay, Path: r.NodeFile(node, state.RootDiskName), ID: &fileid.ID{Device: 2049, Inode: 11}}},
		}))
	case "event":
		if len(args) < 4 {
			ts.Fatalf("usage: fixture event NODE ACTION MESSAGE...")
		}
		ts.Check(r.AppendEvent(state.Event{Node: args[1], Action: args[2], Message: strings.Join(args[3:], " "), OperationID: "op-00000001"}))
	default:
		ts.Fatalf("fixture: unknown kind %q", args[0])
	}
}

func fixtureUUID(node string) string {
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", len(node))
}

func fixtureSpec(names []string) spec.Spec {
	s := spec.Spec{
		Deployment: spec.Deployment{
			Name: spec.DeploymentName, Arch: "amd64", Image: "d12:stable",
			Subnet: spec.Subnet{CIDR: "10.10.10.0/24", Host: "10.10.10.1", Reserved: "10.10.10.2-10.10.10.8", Pool: "10.10.10.9-10.10.10.254"},
			User:   spec.User{Name: "dba", UID: 88},
		},
		Nodes: []spec.Node{}, Skipped: []spec.Skipped{},
	}
	for i, n := range names {
		s.Nodes = append(s.Nodes, spec.Node{
			Name: n, Address: fmt.Sprintf("10.10.10.%d", 10+i), Image: "d12:stable", CPUs: 2,
			MemoryBytes: 4 << 30, RootDiskBytes: 64 << 30, Disks: []spec.Disk{}, Aliases: []string{}, Shares: []spec.Share{},
		})
	}
	if len(names) > 0 {
		s.Nodes[0].Control, s.Control = true, names[0]
	}
	s.Seal()
	return s
}

// cmdJSONSet edits a JSON file in place, keeping its mode:
// jsonset FILE KEY[.KEY|.INDEX...] JSONVALUE ("-" as value deletes the key).
func cmdJSONSet(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: jsonset FILE KEY.PATH JSONVALUE|-")
	}
	path := ts.MkAbs(args[0])
	data, err := os.ReadFile(path)
	ts.Check(err)
	var doc any
	ts.Check(json.Unmarshal(data, &doc))
	keys := strings.Split(args[1], ".")
	cur := doc
	for _, k := range keys[:len(keys)-1] {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[k]
		case []any:
			i, err := strconv.Atoi(k)
			ts.Check(err)
			cur = c[i]
		default:
			ts.Fatalf("jsonset: %s: not a container at %q", args[1], k)
		}
	}
	last := keys[len(keys)-1]
	var v any
	if args[2] != "-" {
		ts.Check(json.Unmarshal([]byte(args[2]), &v))
	}
	switch c := cur.(type) {
	case map[string]any:
		if args[2] == "-" {
			delete(c, last)
		} else {
			c[last] = v
		}
	case []any:
		i, err := strconv.Atoi(last)
		ts.Check(err)
		c[i] = v
	default:
		ts.Fatalf("jsonset: %s: not a container", args[1])
	}
	out, err := json.Marshal(doc)
	ts.Check(err)
	ts.Check(os.WriteFile(path, append(out, '\n'), 0o600))
}

// cmdWaitFile waits up to 10 s for a file to exist: waitfile PATH.
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfile PATH")
	}
	for i := 0; i < 1000; i++ {
		if _, err := os.Stat(ts.MkAbs(args[0])); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	ts.Fatalf("waitfile: %s did not appear within 10s", args[0])
}
