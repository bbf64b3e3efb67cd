package cli

import (
	"fmt"
	"io"
	"os"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/imagecache"
	"barn.dev/lib/imageref"
	"barn.dev/lib/plan"
	"barn.dev/lib/qemu"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

// planCmd is `barn-plan [-f FILE] [NODE...]`.
type planCmd struct {
	File  string   `short:"f" name:"file" placeholder:"FILE" predictor:"file" help:"Read the barn.spec/v1 document from FILE instead of stdin (- is stdin)."`
	Repo  string   `short:"r" name:"repo" placeholder:"NAME" help:"Resolve images with this repository's active catalog (default: BARN_REPO, then the official repository)."`
	Nodes []string `arg:"" optional:"" name:"node" predictor:"node" help:"Plan only these nodes (desired or committed names); every other node keeps its applied definition."`
	overrideFlags
}

// Run reads the desired spec and the applied state, and emits barn.plan/v1.
// It is read-only: it takes no lock, creates nothing and writes nothing
// under the state root. Every outcome, including recreate and missing,
// exits 0; a damaged state document is integrity (7), never "create".
func (c *planCmd) Run(env *tool.Env) error {
	overrides, err := c.overrideFlags.resolve(env.Getenv)
	if err != nil {
		return err
	}
	desired, err := c.readSpec(env)
	if err != nil {
		return err
	}
	root, err := state.Inspect(env.Getenv)
	if err != nil {
		return err
	}
	var notes []string
	if note := lockNote(root); note != "" {
		notes = append(notes, note)
	}
	applied, nodes, err := readApplied(root)
	if err != nil {
		return err
	}
	resolver, err := imageResolver(env, root, c.Repo)
	if err != nil {
		return err
	}
	runtime, runtimeWarning := runtimeProfile(env)
	in := plan.Input{
		Desired:   desired,
		Applied:   applied,
		Nodes:     nodes,
		Running:   liveness(env, nodes),
		Resolver:  resolver,
		Cached:    func(id imageref.Identity) bool { return imagecache.Present(root.ImagesDir(), id) },
		Selected:  c.Nodes,
		Overrides: overrides,
		Runtime:   runtime,
		// The guest architectures barn-node can launch on this host: a
		// plan it could not carry out is refused here, before apply.
		Launchable: qemu.CheckGuestArch,
	}
	p, err := plan.Compute(in)
	if err != nil {
		return err
	}
	if runtimeWarning != nil {
		p.Warnings = append(p.Warnings, *runtimeWarning)
	}
	p.Notes = append(p.Notes, notes...)
	return env.Emit(p)
}

// readSpec reads the desired barn.spec/v1 from -f FILE or stdin; an
// upstream barn.error/v1 passes through unchanged.
func (c *planCmd) readSpec(env *tool.Env) (*spec.Spec, error) {
	var r io.Reader = env.In
	source := "stdin"
	if c.File != "" && c.File != "-" {
		f, err := os.Open(c.File)
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Usage, err, "reading the desired spec").
				WithReason("spec_unreadable").
				WithNext(fmt.Sprintf("barn-inventory resolve -f INVENTORY > %s", c.File))
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			return nil, exitcode.New(exitcode.Usage, "reading the desired spec: %s is a directory, not a %s file", c.File, spec.Schema).
				WithReason("spec_unreadable")
		}
		r, source = f, c.File
	}
	var s spec.Spec
	if err := env.ReadDocument(r, source, spec.Schema, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
