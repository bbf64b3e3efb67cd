package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"barn.dev/lib/disk"
	"barn.dev/lib/guest"
	"barn.dev/lib/lifecycle"
	"barn.dev/lib/snapshot"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

// snapshotCmd is `barn-node snapshot save|list|restore|delete`: whole-lab
// snapshots (lib/snapshot).
type snapshotCmd struct {
	Save    snapSaveCmd    `cmd:"" help:"Snapshot the lab (or the named nodes), all together: with guest memory when running (paused, saved, resumed), disk-only when stopped."`
	List    snapListCmd    `cmd:"" aliases:"ls" help:"List snapshots: nodes, time, size on disk, memory included, and the command that finishes an interrupted one."`
	Restore snapRestoreCmd `cmd:"" help:"Return the snapshot's nodes to it (destructive: asks on the terminal, --force for scripts); a memory snapshot resumes the lab running, no reboot."`
	Delete  snapDeleteCmd  `cmd:"" help:"Delete a snapshot by its record; also rolls back an interrupted save and finishes an interrupted delete."`
}

type snapSaveCmd struct {
	Name  string   `arg:"" help:"Snapshot name (1-64 of a-z 0-9 _ . -)."`
	Nodes []string `arg:"" optional:"" name:"node" predictor:"node" help:"Nodes to include (default: all applied nodes)."`
}

type snapListCmd struct{}

type snapRestoreCmd struct {
	Force bool   `help:"Do not ask for confirmation (required without a terminal)."`
	Name  string `arg:"" help:"Snapshot name."`
}

type snapDeleteCmd struct {
	Name string `arg:"" help:"Snapshot name."`
}

// SnapshotResult is what save, restore and delete print.
type SnapshotResult struct {
	Schema   string    `json:"schema"` // barn.snapshot-result/v1
	Action   string    `json:"action"` // saved, restored, deleted
	Snapshot *SnapInfo `json:"snapshot,omitempty"`
	Name     string    `json:"name"`
	Kept     []string  `json:"kept,omitempty"` // files delete left because they are not the ones recorded
	// ElapsedMS is the transaction's wall time in milliseconds (lock,
	// checks, the snapshot jobs, the record), as barn.result/v1's.
	ElapsedMS int64 `json:"elapsed_ms"`
	// Warnings are the guest clocks a memory save or restore left behind
	// the host's (stage "clock").
	Warnings []lifecycle.Warning `json:"warnings,omitempty"`
}

// SnapshotList is what list prints.
type SnapshotList struct {
	Schema    string     `json:"schema"` // barn.snapshot-list/v1
	Snapshots []SnapInfo `json:"snapshots"`
}

// SnapInfo is one snapshot as list shows it.
type SnapInfo struct {
	Name      string    `json:"name"`
	State     string    `json:"state"`
	Nodes     []string  `json:"nodes"`
	Memory    bool      `json:"memory"`
	SizeBytes int64     `json:"size_bytes"`
	CreatedAt time.Time `json:"created_at"`
	Paused    []string  `json:"paused,omitempty"`
	Next      string    `json:"next,omitempty"`
}

func info(r *snapshot.Record) SnapInfo {
	s := SnapInfo{Name: r.Name, State: r.State, Memory: r.Memory, SizeBytes: r.SizeBytes, CreatedAt: r.CreatedAt, Paused: r.Paused, Next: snapshot.Next(r)}
	for _, n := range r.Nodes {
		s.Nodes = append(s.Nodes, n.Node)
	}
	return s
}

// RenderText is list's human view.
func (l SnapshotList) RenderText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tNODES\tMEMORY\tSIZE\tCREATED\tNEXT")
	for _, s := range l.Snapshots {
		mem := "no"
		if s.Memory {
			mem = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d MiB\t%s\t%s\n", s.Name, s.State, strings.Join(s.Nodes, ","), mem, s.SizeBytes>>20, s.CreatedAt.Local().Format(time.DateTime), s.Next)
	}
	return tw.Flush()
}

func engine(env *tool.Env) (*snapshot.Engine, error) {
	root, err := state.Inspect(env.Getenv)
	if err != nil {
		return nil, err
	}
	e := &snapshot.Engine{Root: root, Disk: disk.Tool{}, Log: env.Err,
		Command: state.CommandLine(append([]string{env.Tool}, env.Args...)),
		Waiting: func(h state.LockHolder) {
			env.Stderrf("waiting for another barn command: %s (pid %d, since %s)", h.Command, h.PID, h.Started.Local().Format("15:04:05"))
		}}
	if CrashHook != nil {
		e.Hook = CrashHook(env.Getenv)
	}
	return e, nil
}

func (c *snapSaveCmd) Run(env *tool.Env) error {
	e, err := engine(env)
	if err != nil {
		return err
	}
	began := time.Now()
	r, err := e.Save(env.Ctx, c.Name, c.Nodes)
	if err != nil {
		return err
	}
	i := info(r)
	res := SnapshotResult{Schema: "barn.snapshot-result/v1", Action: "saved", Name: r.Name, Snapshot: &i, ElapsedMS: time.Since(began).Milliseconds()}
	if r.Memory {
		res.Warnings = clockBehind(env, time.Since(began), "the lab was paused for at most %s while it was saved: guest clocks are up to that far behind the host's")
	}
	return env.Emit(res)
}

func (c *snapListCmd) Run(env *tool.Env) error {
	root, err := state.Inspect(env.Getenv)
	if err != nil {
		return err
	}
	rs, err := snapshot.All(root.Dir)
	if err != nil {
		return err
	}
	l := SnapshotList{Schema: "barn.snapshot-list/v1", Snapshots: []SnapInfo{}}
	for _, r := range rs {
		l.Snapshots = append(l.Snapshots, info(r))
	}
	return env.Emit(l)
}

func (c *snapRestoreCmd) Run(env *tool.Env) error {
	if err := snapshot.CheckName(c.Name); err != nil {
		return err
	}
	if err := env.Confirm(c.Force, false, "restore", fmt.Sprintf("Restore snapshot %s: its nodes lose everything since it was taken.", c.Name)); err != nil {
		return err
	}
	e, err := engine(env)
	if err != nil {
		return err
	}
	began := time.Now()
	r, err := e.Restore(env.Ctx, c.Name)
	if err != nil {
		return err
	}
	i := info(r)
	res := SnapshotResult{Schema: "barn.snapshot-result/v1", Action: "restored", Name: r.Name, Snapshot: &i, ElapsedMS: time.Since(began).Milliseconds()}
	if r.Memory {
		res.Warnings = clockBehind(env, time.Since(r.CreatedAt), "the guests resumed at the time snapshot "+r.Name+" was taken, %s ago: guest clocks are about that far behind the host's")
	}
	return env.Emit(res)
}

// clockBehind is the warning, also printed on stderr, that a memory save
// or restore left every guest clock about behind (the guest's clock stood
// still while its VM was paused, and a restored vmstate carries the clock
// of its save) — nil within guest.DefaultMaxSkew. It is computed, not
// measured: reading every clock over SSH would cost a restore more than
// it takes; `barn-node time status` measures, `time sync` corrects.
// format has one %s, the duration.
func clockBehind(env *tool.Env, behind time.Duration, format string) []lifecycle.Warning {
	if behind <= guest.DefaultMaxSkew {
		return nil
	}
	d := fmt.Sprintf(format, behind.Round(100*time.Millisecond)) + "; correct them with: barn-node time sync"
	env.Stderrf("warning: %s", d)
	return []lifecycle.Warning{{Stage: "clock", Detail: d}}
}

func (c *snapDeleteCmd) Run(env *tool.Env) error {
	e, err := engine(env)
	if err != nil {
		return err
	}
	began := time.Now()
	kept, err := e.Delete(env.Ctx, c.Name)
	if err != nil {
		return err
	}
	return env.Emit(SnapshotResult{Schema: "barn.snapshot-result/v1", Action: "deleted", Name: c.Name, Kept: kept, ElapsedMS: time.Since(began).Milliseconds()})
}

// purgeSnapshots ends a purge: every snapshot is deleted by its record
// (the nodes are gone, so only the copies and records are left to
// remove); files a record does not prove are Barn's are kept and noted.
func purgeSnapshots(env *tool.Env, res *lifecycle.Result) error {
	e, err := engine(env)
	if err != nil {
		return err
	}
	rs, err := snapshot.All(e.Root.Dir)
	if err != nil {
		return err
	}
	for _, r := range rs {
		kept, err := e.Delete(env.Ctx, r.Name)
		if err != nil {
			return err
		}
		if res != nil {
			res.Notes = append(res.Notes, "deleted snapshot "+r.Name)
			for _, k := range kept {
				res.Notes = append(res.Notes, "kept "+k)
			}
		}
	}
	return nil
}
