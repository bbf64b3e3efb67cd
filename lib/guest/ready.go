package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"barn.dev/lib/cidata"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/quote"
)

// DefaultReadyTimeout is the readiness wait when the spec sets none.
const DefaultReadyTimeout = 180 * time.Second

// PollInterval is the pause between looks at the guest's markers, in the
// guest while a probe waits and on the host between probes.
var PollInterval = 500 * time.Millisecond

// ProbeWait bounds how long one probe waits in the guest for a marker.
// A probe is one SSH session whose command looks at the state directory
// every PollInterval until error.json or ready.json exists or ProbeWait
// has passed: one login per ProbeWait rather than per PollInterval, so
// the guest's only (emulated) vCPU runs its setup instead of a stream of
// sshd handshakes and PAM sessions, while detection latency stays one
// PollInterval.
var ProbeWait = 20 * time.Second

// Warning is a failed optional stage: the node is usable with a limitation.
type Warning struct {
	Stage  string `json:"stage"`
	Detail string `json:"detail"`
}

// Disk is a data disk as the guest mounted it.
type Disk struct {
	Name       string `json:"name"`
	Mount      string `json:"mount"`
	Filesystem string `json:"filesystem"` // actual: xfs or ext4
}

// Marker is /var/lib/barn/ready.json as the guest wrote it.
type Marker struct {
	Node         string    `json:"node"`
	Generation   int64     `json:"generation"`
	SpecHash     string    `json:"spec_hash"`
	SetupVersion string    `json:"setup_version"`
	Warnings     []Warning `json:"warnings"`
	Repairs      []string  `json:"repairs"`
	Disks        []Disk    `json:"disks"`
}

// Ready is the outcome of a readiness wait.
type Ready struct {
	Warnings []Warning `json:"warnings"` // failed optional stages, plus setup-update
	Repairs  []string  `json:"repairs"`  // e.g. "data: reset to an empty xfs filesystem; previous data discarded"
	Disks    []Disk    `json:"disks"`
	Marker   Marker    `json:"marker"`
	Probes   int       `json:"probes"` // ssh round trips it took
}

// BootstrapError is the guest's record of a failed required stage
// (/var/lib/barn/error.json).
type BootstrapError struct {
	ExitStatus int    `json:"exit_status"`
	Stage      string `json:"stage"`
	Detail     string `json:"detail"`
}

// probed, when set (tests only), is called after each probe that did not
// end the wait, with the probe's number and what it was missing: the
// synchronisation point tests use to change the guest between probes.
var probed func(probe int, last string)

// stateDir is the guest's setup state directory (tests point it at a
// temporary directory served by a local sshd).
var stateDir = cidata.StateDir

// probeCommand prints "error <json>", "ready <json>" or, when neither
// marker appears within wait (whole seconds, at least 0; measured on the
// guest's /proc/uptime with the shell's builtin read, so the loop forks
// only sleep, which falls back to whole seconds where fractions are
// refused), "pending".
func probeCommand(wait time.Duration) string {
	e, r := quote.Shell(stateDir+"/error.json"), quote.Shell(stateDir+"/ready.json")
	poll := strconv.FormatFloat(PollInterval.Seconds(), 'f', -1, 64)
	secs := strconv.Itoa(max(0, int(wait/time.Second)))
	return "read up _ </proc/uptime; end=$((${up%.*} + " + secs + ")); " +
		"while :; do " +
		"if [ -r " + e + " ]; then printf 'error '; cat " + e + "; exit; fi; " +
		"if [ -r " + r + " ]; then printf 'ready '; cat " + r + "; exit; fi; " +
		"read up _ </proc/uptime; [ \"${up%.*}\" -lt \"$end\" ] || break; " +
		"sleep " + poll + " 2>/dev/null || sleep 1; done; echo pending"
}

// WaitReady probes the guest over SSH until its ready marker proves the
// expected identity: node, generation and node spec hash. Each probe waits
// in the guest for a marker (probeCommand: up to ProbeWait, looking every
// PollInterval) and is bounded by ConnectTimeout and ProbeWait +
// ConnectTimeout + 10 s overall; a probe that ends without the expected
// marker is followed by the next one PollInterval later.
//
// Errors (all *exitcode.Error):
//   - the guest wrote error.json: runtime, reason "guest_setup_failed",
//     "guest bootstrap failed during <stage>: <detail>", next
//     "barn-node logs NODE"; returned on the first probe that sees it;
//   - a permanent SSH failure (host key changed, auth refused, bad key
//     permissions…): integrity for host keys, runtime otherwise, at once;
//   - timeout (≤0 means DefaultReadyTimeout): runtime, reason
//     "readiness_timeout", naming the last ssh stderr line or marker
//     mismatch;
//   - ctx cancelled: cancelled.
func WaitReady(ctx context.Context, t Target, timeout time.Duration) (Ready, error) {
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	deadline := time.Now().Add(timeout)
	last := "no answer yet"
	for probes := 1; ; probes++ {
		wait := min(ProbeWait, time.Until(deadline))
		probe, err := ExecArgv(t, []string{"sh", "-c", probeCommand(wait)})
		if err != nil {
			return Ready{}, err
		}
		pctx, cancel := context.WithTimeout(ctx, min(wait+ConnectTimeout+10*time.Second, time.Until(deadline)+time.Second))
		var out, errb bytes.Buffer
		code, err := Run(pctx, probe, Streams{Out: &out, Err: &errb})
		cancel()
		if ctx.Err() != nil {
			return Ready{}, exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "cancelled while waiting for %s", t.Node)
		}
		if err != nil && exitcode.ClassOf(err) != exitcode.Cancelled {
			return Ready{}, err
		}
		switch {
		case err != nil:
			if last == "no answer yet" { // keep what an earlier probe learnt
				last = "probe timed out"
			}
		case code == 0:
			r, done, why, ferr := parseProbe(t, out.Bytes())
			if ferr != nil {
				return Ready{}, ferr
			}
			if done {
				r.Probes = probes
				return r, nil
			}
			last = why
		default:
			msg := errb.String()
			if reason := PermanentSSHError(msg); reason != "" {
				class := exitcode.Runtime
				next := ""
				if reason == "host_key_mismatch" {
					class = exitcode.Integrity
					next = "the guest's host key changed for the same VM instance; inspect with barn-node logs " + t.Node
				}
				e := exitcode.New(class, "ssh to %s (127.0.0.1:%d) failed: %s", t.Node, t.Port, lastLine(msg)).WithReason(reason)
				if next != "" {
					e = e.WithNext(next)
				}
				return Ready{}, e
			}
			if s := strings.TrimSpace(msg); s != "" {
				last = lastLine(s)
			} else {
				last = fmt.Sprintf("ssh exited with status %d", code)
			}
		}
		if probed != nil {
			probed(probes, last)
		}
		if !time.Now().Add(PollInterval).Before(deadline) {
			return Ready{}, exitcode.New(exitcode.Runtime, "guest %s did not become ready within %s: %s", t.Node, timeout, last).
				WithReason("readiness_timeout").WithNext("barn-node logs " + t.Node)
		}
		select {
		case <-ctx.Done():
			return Ready{}, exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "cancelled while waiting for %s", t.Node)
		case <-time.After(PollInterval):
		}
	}
}

// parseProbe interprets one probe's stdout. done is true when the marker
// proves t's identity; why says what is missing otherwise.
func parseProbe(t Target, out []byte) (r Ready, done bool, why string, err error) {
	s := strings.TrimSpace(string(out))
	switch {
	case strings.HasPrefix(s, "error "):
		var be BootstrapError
		if jerr := json.Unmarshal([]byte(strings.TrimPrefix(s, "error ")), &be); jerr != nil {
			return r, false, "", exitcode.New(exitcode.Runtime, "guest %s: unreadable %s: %v", t.Node, cidata.ErrorFile, jerr).
				WithReason("guest_setup_failed").WithNext("barn-node logs " + t.Node)
		}
		return r, false, "", exitcode.New(exitcode.Runtime, "guest bootstrap failed during %s: %s", be.Stage, be.Detail).
			WithReason("guest_setup_failed").WithDetail(be).WithNext("barn-node logs " + t.Node)
	case strings.HasPrefix(s, "ready "):
		var m Marker
		if jerr := json.Unmarshal([]byte(strings.TrimPrefix(s, "ready ")), &m); jerr != nil {
			return r, false, fmt.Sprintf("ready marker is not JSON yet: %v", jerr), nil
		}
		if m.Node != t.Node || m.Generation != t.Generation || (t.SpecHash != "" && m.SpecHash != t.SpecHash) {
			return r, false, fmt.Sprintf("ready marker is for %s generation %d spec %.12s, want %s generation %d spec %.12s",
				m.Node, m.Generation, m.SpecHash, t.Node, t.Generation, t.SpecHash), nil
		}
		r = Ready{Warnings: []Warning{}, Repairs: []string{}, Disks: []Disk{}, Marker: m}
		r.Warnings = append(r.Warnings, m.Warnings...)
		r.Repairs = append(r.Repairs, m.Repairs...)
		r.Disks = append(r.Disks, m.Disks...)
		if m.SetupVersion != cidata.SetupVersion {
			r.Warnings = append(r.Warnings, Warning{Stage: "setup-update", Detail: fmt.Sprintf("guest setup helpers need an update (%s, want %s)", m.SetupVersion, cidata.SetupVersion)})
		}
		return r, true, "", nil
	case s == "pending":
		return r, false, "guest setup has not finished (no " + cidata.ReadyFile + ")", nil
	default:
		return r, false, "unexpected probe output " + fmt.Sprintf("%.80q", s), nil
	}
}
