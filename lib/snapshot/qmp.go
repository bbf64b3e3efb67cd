package snapshot

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/qmp"
	"barn.dev/lib/state"
)

// session opens Barn's own QMP monitor of running node n and proves on it
// that QEMU answers as the node (name and VM UUID). The session is
// bounded by ctx and by qmp.DefaultTimeout, or jobTimeout for a session
// that waits for a snapshot job: QEMU's monitor does not answer while its
// main loop writes or reads the vmstate.
func session(ctx context.Context, n *state.Node, long bool) (*qmp.Session, error) {
	m := qmp.Monitor{Socket: n.Runtime.BarnQMP}
	if long {
		m.Timeout = jobTimeout
	}
	s, err := m.Open(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Verify(n.Node, n.VMUUID); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// command runs one QMP command on running node n after proving its
// identity on the same connection.
func command(ctx context.Context, n *state.Node, cmd string, args any) error {
	s, err := session(ctx, n, true)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "%s: QMP %s", n.Node, cmd)
	}
	defer s.Close()
	if err := s.Execute(cmd, args, nil); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "%s: QMP %s", n.Node, cmd)
	}
	return nil
}

// job runs one snapshot job (snapshot-save, snapshot-load or
// snapshot-delete; QEMU qapi/migration.json) on running node n over the
// images of sn with the tag of snapshot name, waits until it concludes
// (polling query-jobs, bounded by ctx and jobTimeout), dismisses it and
// returns its error. The vmstate goes into the root overlay.
func job(ctx context.Context, n *state.Node, cmd, name string, sn Node) error {
	ctx, cancel := context.WithTimeout(ctx, jobTimeout)
	defer cancel()
	s, err := session(ctx, n, true)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "%s: QMP %s", n.Node, cmd)
	}
	defer s.Close()
	id := "barn-" + uuid.NewString()[:8]
	args := map[string]any{"job-id": id, "tag": Tag(name), "devices": devices(sn)}
	if cmd != "snapshot-delete" {
		args["vmstate"] = "root"
	}
	if err := s.Execute(cmd, args, nil); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "%s: QMP %s", n.Node, cmd)
	}
	jerr := waitJob(ctx, s, id)
	if err := s.Execute("job-dismiss", map[string]any{"id": id}, nil); err != nil && jerr == nil {
		jerr = err
	}
	if jerr != nil {
		return exitcode.Wrap(exitcode.Runtime, jerr, "%s: %s %s", n.Node, cmd, Tag(name))
	}
	return nil
}

// jobTimeout bounds one snapshot job (the vmstate of a node is at most its
// memory size).
const jobTimeout = 10 * time.Minute

func waitJob(ctx context.Context, s *qmp.Session, id string) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var jobs []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Error  string `json:"error"`
		}
		if err := s.Execute("query-jobs", nil, &jobs); err != nil {
			return err
		}
		for _, j := range jobs {
			if j.ID == id && j.Status == "concluded" {
				if j.Error != "" {
					return fmt.Errorf("%s", j.Error)
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("job %s did not conclude: %w", id, ctx.Err())
		case <-tick.C:
		}
	}
}

func devices(sn Node) []string {
	out := make([]string, 0, len(sn.Images))
	for _, im := range sn.Images {
		out = append(out, im.Device)
	}
	return out
}

// running reports whether n runs: phase running and QMP proves its
// identity. A node recorded running whose QMP does not answer as it is an
// error (Barn cannot pause what it cannot prove).
func running(ctx context.Context, n *state.Node) (bool, error) {
	if n.Phase != state.Running {
		if n.Phase == state.Stopped {
			return false, nil
		}
		return false, exitcode.New(exitcode.Conflict, "node %s is %s", n.Node, n.Phase).
			WithReason("interrupted_transition").WithNext("barn-node status " + n.Node)
	}
	s, err := session(ctx, n, false)
	if err != nil {
		return false, exitcode.Wrap(exitcode.Conflict, err, "node %s is recorded running but its QMP does not prove it", n.Node).
			WithReason("snapshot_node_unproven").WithNext("barn-node status " + n.Node)
	}
	s.Close()
	return true, nil
}
