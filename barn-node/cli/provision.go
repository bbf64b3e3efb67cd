package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/guest"
	"barn.dev/lib/tool"
)

const maxScriptBytes = 4 << 20

type provisionCmd struct {
	Script   string        `short:"s" required:"" type:"path" help:"Script to stream to guest bash (regular file, not a symlink, ≤4 MiB)."`
	Sudo     bool          `help:"Run the script as root with sudo -n."`
	Parallel int           `short:"p" default:"1" help:"Nodes at a time (1–4)."`
	Timeout  time.Duration `short:"t" default:"1h" help:"Bound on the whole operation (max 24h)."`
	Nodes    []string      `arg:"" optional:"" name:"node" predictor:"node" help:"Nodes (default: every committed node)."`
}

// ProvisionResult is one node's outcome.
type ProvisionResult struct {
	Node     string `json:"node"`
	ExitCode int    `json:"exit_code"` // the remote status (255: ssh failed); -1 when there is none (see error)
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	Error    string `json:"error,omitempty"` // set when the script could not run or did not finish
}

// ProvisionDoc is barn.provision/v1.
type ProvisionDoc struct {
	Schema       string            `json:"schema"`
	ScriptSHA256 string            `json:"script_sha256"`
	Sudo         bool              `json:"sudo"`
	Results      []ProvisionResult `json:"results"`
	Successful   int               `json:"successful"`
	Failed       int               `json:"failed"`
}

// RenderText prints one line per node followed by its output.
func (d ProvisionDoc) RenderText(w io.Writer) error {
	for _, r := range d.Results {
		fmt.Fprintf(w, "== %s: exit %d %s\n%s%s", r.Node, r.ExitCode, r.Error, r.Stdout, r.Stderr)
	}
	_, err := fmt.Fprintf(w, "%d successful, %d failed\n", d.Successful, d.Failed)
	return err
}

func (c *provisionCmd) Run(env *tool.Env) error {
	if c.Parallel < 1 || c.Parallel > 4 {
		return exitcode.New(exitcode.Usage, "--parallel %d: want 1–4", c.Parallel)
	}
	if c.Timeout <= 0 || c.Timeout > 24*time.Hour {
		return exitcode.New(exitcode.Usage, "--timeout %s: want more than 0 and at most 24h", c.Timeout)
	}
	script, err := readScript(c.Script)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(script)
	targets, err := c.targets(env)
	if err != nil {
		return err
	}
	results := c.runAll(env, targets, script)
	doc := ProvisionDoc{Schema: "barn.provision/v1", ScriptSHA256: hex.EncodeToString(sum[:]), Sudo: c.Sudo, Results: results}
	failedCode := -1 // the remote status of the (last) failed node; -1 when it has none
	for _, r := range results {
		if r.ExitCode == 0 && r.Error == "" {
			doc.Successful++
		} else {
			doc.Failed++
			failedCode = r.ExitCode
		}
	}
	if err := env.Emit(doc); err != nil {
		return err
	}
	return provisionVerdict(env, doc, failedCode)
}

// targets are the SSH targets of the named nodes (default: every committed
// node), each once, in the order named; any node not running refuses.
func (c *provisionCmd) targets(env *tool.Env) ([]guest.Target, error) {
	a, err := loadAccess(env)
	if err != nil {
		return nil, err
	}
	nodes := c.Nodes
	if len(nodes) == 0 {
		nodes = a.names
	}
	var targets []guest.Target
	seen := map[string]bool{}
	for _, n := range nodes {
		if _, err := a.resolve(n); err != nil {
			return nil, err
		}
		if seen[n] {
			continue // a node named twice runs the script once
		}
		seen[n] = true
		t, err := a.target(env, n)
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
	}
	return targets, nil
}

// runAll runs script on every target, --parallel at a time, all within
// --timeout, and returns each node's result in target order.
func (c *provisionCmd) runAll(env *tool.Env, targets []guest.Target, script []byte) []ProvisionResult {
	ctx, cancel := context.WithTimeout(env.Ctx, c.Timeout)
	defer cancel()
	remote := []string{"bash", "-s"}
	if c.Sudo {
		remote = []string{"sudo", "-n", "bash", "-s"}
	}
	results := make([]ProvisionResult, len(targets))
	sem := make(chan struct{}, c.Parallel)
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			var out, errb bytes.Buffer
			argv, err := guest.ExecArgv(t, remote)
			code := 0
			if err == nil {
				code, err = guest.Run(ctx, argv, guest.Streams{In: bytes.NewReader(script), Out: &out, Err: &errb})
			}
			results[i] = ProvisionResult{Node: t.Node, ExitCode: code, Stdout: out.String(), Stderr: errb.String()}
			switch {
			case err != nil && ctx.Err() == context.DeadlineExceeded && env.Ctx.Err() == nil:
				results[i].Error = fmt.Sprintf("timed out after %s (--timeout)", c.Timeout)
				results[i].ExitCode = -1
			case err != nil:
				results[i].Error = err.Error()
				results[i].ExitCode = -1
			}
		}()
	}
	wg.Wait()
	return results
}

// provisionVerdict is the exit of an emitted provision document: one
// node's own script status as ssh passes it through, else the batch rule.
func provisionVerdict(env *tool.Env, doc ProvisionDoc, failedCode int) error {
	results := doc.Results
	switch {
	case env.Ctx.Err() != nil:
		return tool.Reported(exitcode.New(exitcode.Cancelled, "provision interrupted"))
	case doc.Failed == 0:
		return nil
	case len(results) == 1 && failedCode > 0 && failedCode != 255:
		// One node: the script's own status, as ssh passes it through.
		env.Stderrf("%s: script exited with status %d", results[0].Node, failedCode)
		return tool.ExitStatus(failedCode)
	case len(results) == 1 && results[0].Error != "":
		return tool.Reported(exitcode.New(exitcode.Runtime, "%s: %s", results[0].Node, results[0].Error))
	}
	// Several nodes: a failed script or connection is runtime on its node,
	// and the batch rule decides (partial when some succeeded).
	failed := make([]exitcode.Class, doc.Failed)
	for i := range failed {
		failed[i] = exitcode.Runtime
	}
	return tool.Reported(exitcode.New(exitcode.BatchClass(len(results), failed), "the script failed on %d of %d node(s)", doc.Failed, len(results)))
}

// readScript reads the script once: a non-empty regular file, not a
// symlink, at most 4 MiB.
func readScript(path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, exitcode.New(exitcode.Usage, "script %s: %v", path, err).WithReason("script_invalid")
	}
	if !fi.Mode().IsRegular() {
		return nil, exitcode.New(exitcode.Usage, "script %s is not a regular file (symlinks are refused)", path).WithReason("script_invalid")
	}
	if fi.Size() == 0 || fi.Size() > maxScriptBytes {
		return nil, exitcode.New(exitcode.Usage, "script %s is %d bytes; want 1 byte to 4 MiB", path, fi.Size()).WithReason("script_invalid")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "read script %s", path)
	}
	if len(b) == 0 || len(b) > maxScriptBytes {
		return nil, exitcode.New(exitcode.Usage, "script %s changed while reading", path).WithReason("script_invalid")
	}
	return b, nil
}
