package fakeqemu

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
)

// runState is the fake's run state (QMP stop/cont) and its snapshot jobs.
// Like QEMU, snapshot-save/load/delete are jobs: the command returns {},
// the job runs, query-jobs shows it "concluded" (with "error" when it
// failed) until job-dismiss. The fake acts on the disk images only, with
// real qemu-img on the qcow2 nodes named in "devices" (internal
// snapshots); it keeps no guest memory, so "vmstate" is only checked to
// be one of the devices.
type runState struct {
	mu      sync.Mutex
	stopped bool // QMP stop after the guest ran
	jobs    map[string]map[string]any
	hot     hotplug // vCPUs and memory hot-plugged (hotplug.go)
}

type snapshotArgs struct {
	JobID   string   `json:"job-id"`
	Tag     string   `json:"tag"`
	VMState string   `json:"vmstate"`
	Devices []string `json:"devices"`
	ID      string   `json:"id"` // job-dismiss
}

// runControl answers stop, cont, the snapshot jobs, query-jobs and
// job-dismiss; ok is false for any other command.
func (v *vm) runControl(cmd string, raw json.RawMessage) (ret any, qerr *qmpError, ok bool) {
	var a snapshotArgs
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, &qmpError{"GenericError", err.Error()}, true
		}
	}
	rs := &v.run
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.jobs == nil {
		rs.jobs = map[string]map[string]any{}
	}
	if ret, qerr, ok := v.runHotplug(cmd, raw); ok {
		return ret, qerr, true
	}
	switch cmd {
	case "stop":
		rs.stopped = true
	case "cont":
		rs.stopped = false
		v.cfg.paused = false
	case "snapshot-save", "snapshot-load", "snapshot-delete":
		if _, dup := rs.jobs[a.JobID]; dup || a.JobID == "" {
			return nil, &qmpError{"GenericError", fmt.Sprintf("Job ID '%s' is invalid or in use", a.JobID)}, true
		}
		job := map[string]any{"id": a.JobID, "type": cmd, "status": "concluded", "current-progress": 1, "total-progress": 1}
		if err := v.snapshotJob(cmd, a); err != nil {
			job["error"] = err.Error()
		}
		rs.jobs[a.JobID] = job
	case "query-jobs":
		out := []map[string]any{}
		for _, j := range rs.jobs {
			out = append(out, j)
		}
		return out, nil, true
	case "job-dismiss":
		if _, ok := rs.jobs[a.ID]; !ok {
			return nil, &qmpError{"GenericError", fmt.Sprintf("Job not found '%s'", a.ID)}, true
		}
		delete(rs.jobs, a.ID)
	default:
		return nil, nil, false
	}
	return map[string]any{}, nil, true
}

// snapshotJob runs qemu-img snapshot -c/-a/-d with a.Tag on each device's
// image, opened as itself (backing null), as QEMU does on its open nodes;
// like QEMU, a delete skips a device without the tag.
func (v *vm) snapshotJob(cmd string, a snapshotArgs) error {
	flag := map[string]string{"snapshot-save": "-c", "snapshot-load": "-a", "snapshot-delete": "-d"}[cmd]
	if cmd != "snapshot-delete" && !contains(a.Devices, a.VMState) {
		return fmt.Errorf("vmstate %q is not one of the devices", a.VMState)
	}
	for _, d := range a.Devices {
		f, ok := v.cfg.blockNodes[d]
		if !ok {
			return fmt.Errorf("Cannot find device='%s' nor node-name='%s'", d, d)
		}
		b, _ := json.Marshal(map[string]any{"driver": "qcow2", "file": map[string]any{"driver": "file", "filename": f}, "backing": nil})
		out, err := exec.Command("qemu-img", "snapshot", flag, a.Tag, "json:"+string(b)).CombinedOutput()
		if err != nil && !(cmd == "snapshot-delete" && strings.Contains(string(out), "not found")) {
			return fmt.Errorf("%s: %s", d, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
