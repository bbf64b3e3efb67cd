package lifecycle

import (
	"barn.dev/lib/nodedir"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/human"
	"barn.dev/lib/imageref"
	"barn.dev/lib/state"
)

// ResultSchema is the schema of the lifecycle result document.
const ResultSchema = "barn.result/v1"

// TCGPerformanceNote is the performance field of every result and status
// that lists a node running under TCG (software emulation, by policy for a
// foreign guest or on request): its timings say nothing about hardware.
const TCGPerformanceNote = "TCG (software emulation): performance figures are not meaningful"

// Result is the barn.result/v1 document printed by apply, start, stop,
// restart, recreate, destroy and purge.
type Result struct {
	Schema     string       `json:"schema"`
	Command    string       `json:"command"`    // apply, start, stop, ...
	Generation int64        `json:"generation"` // applied generation after the command; 0 when none
	Nodes      []NodeResult `json:"nodes"`      // sorted by name
	Failures   []Failure    `json:"failures"`   // sorted by node
	RolledBack []string     `json:"rolled_back"`
	Retained   []string     `json:"retained"` // persistent disks kept in the store ("node/disk")
	Notes      []string     `json:"notes"`
	// Performance is TCGPerformanceNote when any node runs under TCG
	// (software emulation: timings and throughput say nothing about real
	// hardware), else "".
	Performance string `json:"performance"`
	// ElapsedMS is the command's wall time in milliseconds, measured by
	// the tool that ran it (0: not measured).
	ElapsedMS int64 `json:"elapsed_ms"`
	mu        sync.Mutex
	done      func(node, outcome string) // Manager.Phase of each node's outcome; nil: none
}

// NodeResult is one node's outcome.
type NodeResult struct {
	Name     string    `json:"name"`
	Phase    string    `json:"phase"` // a state.Phase, or "absent" after destroy
	Address  string    `json:"address"`
	Image    string    `json:"image"` // exact image "family@version/arch", "" when unknown
	Ports    Ports     `json:"ports"`
	Accel    string    `json:"accel"`  // kvm or tcg
	Action   string    `json:"action"` // created, started, stopped, kept, destroyed, recreated, already-running, ...
	Ready    bool      `json:"ready"`  // guest readiness (SSH + identity marker) was proven in this operation
	Warnings []Warning `json:"warnings"`
	Repairs  []string  `json:"repairs"`
}

// Ports are a node's host ports.
type Ports struct {
	SSH int `json:"ssh"` // management SSH forward on 127.0.0.1; 0 when none
}

// Warning is a non-fatal guest or host finding for one node.
type Warning struct {
	Stage  string `json:"stage"`
	Detail string `json:"detail"`
}

// Failure is one node that failed in a batch.
type Failure struct {
	Node   string `json:"node"`
	Stage  string `json:"stage"` // prepare, start, readiness, stop, destroy, status
	Error  string `json:"error"`
	Reason string `json:"reason,omitempty"`
	Next   string `json:"next,omitempty"`
	class  exitcode.Class
}

// Class is the failure's exit class.
func (f Failure) Class() exitcode.Class { return f.class }

// FailureOf records err as node's failure at stage, keeping its exit class.
func FailureOf(node, stage string, err error) Failure {
	e := exitcode.As(err)
	return Failure{Node: node, Stage: stage, Error: e.Message, Reason: e.Reason, Next: e.Next, class: e.Class}
}

func newResult(command string) *Result {
	return &Result{Schema: ResultSchema, Command: command, Nodes: []NodeResult{}, Failures: []Failure{},
		RolledBack: []string{}, Retained: []string{}, Notes: []string{}}
}

func (r *Result) addNode(n NodeResult) {
	if n.Warnings == nil {
		n.Warnings = []Warning{}
	}
	if n.Repairs == nil {
		n.Repairs = []string{}
	}
	r.mu.Lock()
	r.Nodes = append(r.Nodes, n)
	r.mu.Unlock()
	if r.done != nil {
		r.done(n.Name, n.Action)
	}
}

func (r *Result) fail(node, stage string, err error) {
	f := FailureOf(node, stage, err)
	r.mu.Lock()
	r.Failures = append(r.Failures, f)
	r.mu.Unlock()
	if r.done != nil {
		r.done(node, "failed at "+stage)
	}
}

func (r *Result) rolledBack(paths ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.RolledBack = append(r.RolledBack, paths...)
}

func (r *Result) retained(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Retained = append(r.Retained, s)
}

// sort puts the result in its printed order and states Performance, so
// every result a command prints is final.
func (r *Result) sort() {
	r.Performance = ""
	for _, n := range r.Nodes {
		if n.Accel == "tcg" {
			r.Performance = TCGPerformanceNote
		}
	}
	sort.Slice(r.Nodes, func(i, j int) bool { return r.Nodes[i].Name < r.Nodes[j].Name })
	sort.Slice(r.Failures, func(i, j int) bool { return r.Failures[i].Node < r.Failures[j].Node })
	sort.Strings(r.Retained)
}

// Err is the command's error for its failures among total requested
// nodes: nil when none; otherwise "N of M node(s) failed: node (stage:
// error); …" with the class exitcode.BatchClass gives (the failures' own
// class when every requested node failed with one class, integrity when
// any failure is integrity, else partial (5): some nodes succeeded and
// were kept, or the failures differ). The reason and next are the
// failure's own when one failure decides the class, else "nodes_failed".
func (r *Result) Err(total int) error {
	if len(r.Failures) == 0 {
		return nil
	}
	classes := make([]exitcode.Class, len(r.Failures))
	parts := make([]string, len(r.Failures))
	for i, f := range r.Failures {
		classes[i] = f.class
		parts[i] = fmt.Sprintf("%s (%s: %s)", f.Node, f.Stage, f.Error)
	}
	class := exitcode.BatchClass(total, classes)
	reason, next := "nodes_failed", ""
	if sameFailure(r.Failures) {
		reason, next = r.Failures[0].Reason, r.Failures[0].Next
		if class == exitcode.Partial || reason == "" {
			reason = "nodes_failed"
		}
	} else if class == exitcode.Integrity {
		for _, f := range r.Failures {
			if f.class == exitcode.Integrity {
				reason, next = f.Reason, f.Next
				break
			}
		}
	}
	e := exitcode.New(class, "%d of %d node(s) failed: %s", len(r.Failures), total, strings.Join(parts, "; ")).
		WithReason(reason)
	if next != "" {
		e = e.WithNext(next)
	}
	return e
}

// sameFailure reports whether every failure has the first one's class,
// reason and next (always so for one failure).
func sameFailure(fs []Failure) bool {
	for _, f := range fs[1:] {
		if f.class != fs[0].class || f.Reason != fs[0].Reason || f.Next != fs[0].Next {
			return false
		}
	}
	return true
}

// RenderText implements the --text view: one aligned row per node (NODE,
// STATE, ADDRESS, SSH, ACCEL, ACTION, IMAGE), its repairs and warnings,
// the failures, then a summary a person can act on and how long it took.
func (r *Result) RenderText(w io.Writer) error {
	ready, limited, err := r.renderTable(w)
	if err != nil {
		return err
	}
	for _, n := range r.Nodes {
		for _, rep := range n.Repairs {
			writeLine(w, "repair (%s): %s", n.Name, rep)
		}
		for _, wn := range n.Warnings {
			writeLine(w, "warning (%s, %s): %s", n.Name, wn.Stage, wn.Detail)
		}
	}
	for _, f := range r.Failures {
		writeLine(w, "FAILED %s (%s): %s", f.Node, f.Stage, f.Error)
		if f.Next != "" {
			writeLine(w, "  next: %s", f.Next)
		}
	}
	for _, p := range r.RolledBack {
		writeLine(w, "rolled back: %s", p)
	}
	for _, p := range r.Retained {
		writeLine(w, "retained persistent disk: %s", p)
	}
	for _, n := range r.Notes {
		writeLine(w, "note: %s", n)
	}
	if r.Performance != "" {
		writeLine(w, "note: %s", r.Performance)
	}
	r.renderSummary(w, ready, limited)
	return nil
}

// renderTable writes the aligned node rows and counts the ready nodes and
// those ready with warnings.
func (r *Result) renderTable(w io.Writer) (ready, limited int, err error) {
	if len(r.Nodes) == 0 {
		return 0, 0, nil
	}
	tw := human.Table(w)
	fmt.Fprintln(tw, "NODE\tSTATE\tADDRESS\tSSH\tACCEL\tACTION\tIMAGE")
	for _, n := range r.Nodes {
		phase := n.Phase
		if n.Ready {
			ready++
			phase = "ready"
			if len(n.Warnings) > 0 {
				limited++
				phase = "ready (limited)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, phase, dash(n.Address), sshText(n.Ports.SSH), dash(n.Accel), n.Action, dash(n.Image))
	}
	return ready, limited, tw.Flush()
}

// renderSummary writes what a person can act on and how long it took.
func (r *Result) renderSummary(w io.Writer, ready, limited int) {
	took := ""
	if r.ElapsedMS > 0 {
		took = "took " + human.Duration(time.Duration(r.ElapsedMS)*time.Millisecond)
	}
	if ready == 0 {
		if took != "" {
			writeLine(w, "%s %s", r.Command, took)
		}
		return
	}
	summary := fmt.Sprintf("✓ %s ready", plural(ready, "node"))
	if limited > 0 {
		summary += fmt.Sprintf(" · %d with limitations", limited)
	}
	if took != "" {
		summary += " (" + took + ")"
	}
	writeLine(w, "%s", summary)
	writeLine(w, "connect: barn-node ssh %s", r.Nodes[0].Name)
}

// sshText is the management forward as a person types it, or "-".
func sshText(port int) string {
	if port == 0 {
		return "-"
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// plural renders "1 node", "3 nodes".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func writeLine(w io.Writer, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	_, _ = io.WriteString(w, msg)
}

// ImageLabel is the short exact form "family@version/arch" of an identity.
func ImageLabel(id imageref.Identity) string {
	if id.Image == "" {
		return ""
	}
	return fmt.Sprintf("%s@%s/%s", id.Image, id.Version, id.Arch)
}

func nodeResult(n *state.Node, action string) NodeResult {
	return NodeResult{Name: n.Node, Phase: string(n.Phase), Address: n.Spec.Address, Image: ImageLabel(n.Image),
		Ports: Ports{SSH: n.SSHPort}, Accel: n.Accel, Action: action, Warnings: []Warning{}, Repairs: []string{}}
}

// recovered reports what a settle or rollback did in the result: removed
// artifacts as rolled back, returned disks as retained.
func (r *Result) recovered(rec *nodedir.Recovery) {
	if rec == nil {
		return
	}
	r.rolledBack(rec.RolledBack...)
	for _, d := range rec.Returned {
		r.retained(d)
	}
}
