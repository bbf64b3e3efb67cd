package state

import "barn.dev/lib/exitcode"

// Problem is one finding about a file under the state root: the file, the
// failure class (integrity for damaged documents), what is wrong and, when
// one step settles it, that step (Next; never "barn-state verify", which
// only repeats the finding). It is the Detail of integrity errors and the
// unit of Verify's report.
type Problem struct {
	File    string         `json:"file"`
	Class   exitcode.Class `json:"class"`
	Message string         `json:"message"`
	Next    string         `json:"next,omitempty"`
}

// verifyHint is the generic next step of a damaged document, which
// Verify's own report must not point back to.
const verifyHint = "barn-state verify"

// OneNext is the next step shared by every problem when they all name the
// same one, else "".
func OneNext(problems []Problem) string {
	next := ""
	for i, p := range problems {
		if p.Next == "" || i > 0 && p.Next != next {
			return ""
		}
		next = p.Next
	}
	return next
}
