package cli

import (
	"barn.dev/lib/human"
	"fmt"
	"io"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
	"barn.dev/lib/spec"
	"barn.dev/lib/tool"
)

type resolveCmd struct {
	sourceFlags
	Selector string    `arg:"" optional:"" predictor:"image" help:"One selector to resolve; without it a barn.spec/v1 is read on stdin."`
	Arch     tool.Arch `name:"arch" default:"native" predictor:"arch" help:"Architecture for a single selector (native, amd64, arm64; x86_64/x64 and aarch64/a64 are aliases; any case)."`
}

type resolvedNode struct {
	Node     string            `json:"node"` // "" for a single selector
	Selector string            `json:"selector"`
	Image    imageref.Identity `json:"image"`
}

type resolveDoc struct {
	Schema   string         `json:"schema"`
	Revision uint64         `json:"revision"`
	SpecHash string         `json:"spec_hash"` // of the spec read, "" for a single selector
	Nodes    []resolvedNode `json:"nodes"`
}

func (d resolveDoc) RenderText(w io.Writer) error {
	tw := human.Table(w)
	fmt.Fprintln(tw, "NODE\tSELECTOR\tIMAGE\tARCH\tSHA256")
	for _, n := range d.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s@%s\t%s\t%s\n", dashed(n.Node), n.Selector, n.Image.Image, n.Image.Version, n.Image.Arch, n.Image.SHA256)
	}
	return tw.Flush()
}

func (c *resolveCmd) Run(env *tool.Env) error {
	var s spec.Spec
	if c.Selector == "" {
		if err := env.ReadDocument(env.In, "stdin", spec.Schema, &s); err != nil {
			return err
		}
	}
	cl, err := openClient(env)
	if err != nil {
		return err
	}
	_, cat, rec, err := cl.active(env, c.sourceFlags)
	if err != nil {
		return err
	}
	doc := resolveDoc{Schema: "barn.repo.resolve/v1", Revision: rec.ActiveRevision, Nodes: []resolvedNode{}}
	if c.Selector != "" {
		id, err := cat.Resolve(c.Selector, string(c.Arch))
		if err != nil {
			return err
		}
		doc.Nodes = append(doc.Nodes, resolvedNode{Selector: c.Selector, Image: id})
		return env.Emit(doc)
	}
	doc.SpecHash = s.SpecHash
	for _, n := range s.Nodes {
		id, err := cat.Resolve(n.Image, s.Deployment.Arch)
		if err != nil {
			e := exitcode.As(err)
			return e.WithDetail(map[string]string{"node": n.Name, "selector": n.Image})
		}
		doc.Nodes = append(doc.Nodes, resolvedNode{Node: n.Name, Selector: n.Image, Image: id})
	}
	return env.Emit(doc)
}
