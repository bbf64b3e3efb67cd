package lifecycle

import (
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/spec"
)

func TestPromoteControlHandsTheRoleToTheFirstRemainingNode(t *testing.T) {
	_, d := selectionFixture()
	kept := d.Spec
	kept.Nodes = kept.Nodes[1:] // a, the control node, was destroyed
	note := promoteControl(&kept, "a")
	if kept.Control != "b" || !kept.Node("b").Control || kept.Node("c").Control {
		t.Fatalf("control %q, flags b=%t c=%t; want b alone", kept.Control, kept.Node("b").Control, kept.Node("c").Control)
	}
	if !strings.Contains(note, "the control node a was destroyed; b (10.10.10.11)") {
		t.Fatalf("note = %q", note)
	}
	kept.Seal()
	if err := kept.Validate(); err != nil {
		t.Fatalf("the promoted spec is invalid: %v", err)
	}
	for _, c := range []struct {
		name string
		spec spec.Spec
		was  string
	}{
		{"a kept control node", d.Spec, "a"},
		{"no node left", spec.Spec{Control: "a"}, "a"},
	} {
		s := c.spec
		if note := promoteControl(&s, c.was); note != "" || s.Control != c.spec.Control {
			t.Errorf("%s: note %q control %q, want nothing changed", c.name, note, s.Control)
		}
	}
}

func TestSelectedControlTakesTheRoleBackOnlyFromAPromotedNode(t *testing.T) {
	p, d := selectionFixture()
	// b was promoted when a was destroyed; the plan re-creates a, the
	// inventory's control node.
	d.Spec.Nodes = d.Spec.Nodes[1:]
	promoteControl(&d.Spec, "a")
	d.Spec.Seal()
	out, err := keepPeers(p, d, []string{"a"}, "b", "applying", "again")
	if err != nil {
		t.Fatalf("taking the role back from promoted b: %v", err)
	}
	if out.Control != "a" || out.Node("b").Control {
		t.Fatalf("control %q, b.control %t; want a alone", out.Control, out.Node("b").Control)
	}
	// b built as the control node (not promoted) is a second control node.
	_, err = keepPeers(p, d, []string{"a"}, "", "applying", "again")
	if e := exitcode.As(err); err == nil || e.Reason != "selection_conflict" {
		t.Fatalf("err = %v, want selection_conflict", err)
	}
}

func TestRecreatingThePromotedNodeAloneKeepsItsRole(t *testing.T) {
	p, d := selectionFixture()
	d.Spec.Nodes = d.Spec.Nodes[1:]
	promoteControl(&d.Spec, "a")
	d.Spec.Seal()
	// the inventory still names a; b alone is recreated (its desired
	// definition is not the control node)
	p.Spec.Nodes[0].Control = true
	out, err := keepPeers(p, d, []string{"b"}, "b", "recreating", "again")
	if err != nil {
		t.Fatalf("recreating promoted b alone: %v", err)
	}
	if out.Control != "b" || !out.Node("b").Control || out.Node("a") != nil {
		t.Fatalf("control %q nodes %v; want b to keep the role", out.Control, out.NodeNames())
	}
	if _, err := keepPeers(p, d, []string{"b"}, "", "recreating", "again"); exitcode.As(err) == nil || exitcode.As(err).Reason != "selection_conflict" {
		t.Fatalf("a control node built as such that loses its role: err = %v, want selection_conflict", err)
	}
}
