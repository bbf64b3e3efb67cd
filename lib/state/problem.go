package state

import "barn.dev/lib/exitcode"

// Problem is one finding about a file under the state root: the file, the
// failure class (integrity for damaged documents) and what is wrong. It is
// the Detail of integrity errors and the unit of Verify's report.
type Problem struct {
	File    string         `json:"file"`
	Class   exitcode.Class `json:"class"`
	Message string         `json:"message"`
}
