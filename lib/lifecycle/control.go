package lifecycle

import (
	"fmt"

	"barn.dev/lib/spec"
	"barn.dev/lib/state"
)

// promoteControl keeps a deployment that lost its control node usable:
// when kept (the applied spec after a destroy, nodes by address) no longer
// holds its control node, the first remaining node becomes the control
// node of the applied spec, so that barn-node ssh and exec default to it
// and barn-plan can say that the inventory's admin_ip and the applied
// control node differ. It returns the note for the result ("" when
// nothing changed). The promoted guest keeps what it was built with: it
// holds no deployment private key until it is recreated as the control
// node (its committed node state still says control: false, which is how
// promotedControl tells a promoted control node from a built one).
func promoteControl(kept *spec.Spec, was string) string {
	if was == "" || kept.Node(was) != nil || len(kept.Nodes) == 0 {
		return ""
	}
	next := &kept.Nodes[0]
	next.Control, kept.Control = true, next.Name
	return fmt.Sprintf("the control node %s was destroyed; %s (%s), the first remaining node, is now the control node: barn-node ssh and exec default to it. "+
		"The inventory's admin_ip still names %s: barn-plan says what to do", was, next.Name, next.Address, was)
}

// promotedControl names the applied control node when destroy promoted
// it (promoteControl): its committed node state says it was not built as
// the control node. "" when there is none, or it cannot be read.
func (m *Manager) promotedControl(applied *state.Deployment) string {
	if applied == nil || applied.Spec.Control == "" {
		return ""
	}
	n, err := m.readCommitted(applied.Spec.Control)
	if err != nil || n == nil || n.Spec.Control {
		return ""
	}
	return applied.Spec.Control
}
