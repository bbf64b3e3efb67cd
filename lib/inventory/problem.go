package inventory

import (
	"fmt"
	"sort"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/quote"
)

// Problem is one structured inventory error. File/Line/Column locate the
// value as written (1-based; 0 when there is no position); Host is the host
// key it applies to, Key the variable, Value its spelling as written, Origin
// where it was inherited from ("host" or "host_vars" for the host's own
// entry or file, "all", a group name, "group_vars/<group>", or "" for file
// level problems). Ansible is set when Barn refuses a value Ansible itself
// would resolve: what Ansible picks, so nobody has to guess.
type Problem struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Host    string `json:"host"`
	Key     string `json:"key"`
	Value   string `json:"value"`
	Origin  string `json:"origin"`
	Message string `json:"message"`
	Hint    string `json:"hint"`
	Ansible *Pick  `json:"ansible,omitempty"`
}

// Pick is the value Ansible resolves for a variable Barn refuses: Value
// decoded as Ansible decodes it (nil, bool, int64, float64, string, []any,
// map[string]any), Written as spelled, where it is written (File, Line,
// Origin as in Problem) and Why Ansible chooses it.
type Pick struct {
	Value   any    `json:"value"`
	Written string `json:"written"`
	File    string `json:"file"`
	Line    int    `json:"line"`
	Origin  string `json:"origin"`
	Why     string `json:"why"`
}

// String renders p as one line:
//
//	pigsty.yml:12:5: host 10.10.10.11 vm_mem = "8G": invalid size (inherited from group pg-test); write 8GiB
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", p.Line, p.Column)
	}
	b.WriteString(": ")
	if p.Host != "" {
		fmt.Fprintf(&b, "host %s ", p.Host)
	}
	if p.Key != "" {
		b.WriteString(p.Key)
		if p.Value != "" || p.Line > 0 {
			fmt.Fprintf(&b, " = %q", p.Value)
		}
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	switch {
	case p.Origin == "host" || p.Origin == "host_vars" || p.Origin == "" || strings.Contains(p.Message, p.Origin):
	case p.Origin == "all":
		b.WriteString(" (inherited from all.vars)")
	case strings.HasPrefix(p.Origin, "group_vars/"):
		fmt.Fprintf(&b, " (inherited from %s)", p.Origin)
	default:
		fmt.Fprintf(&b, " (inherited from group %s)", p.Origin)
	}
	if p.Hint != "" {
		b.WriteString("; ")
		b.WriteString(p.Hint)
	}
	return b.String()
}

// problems collects Problems, dropping exact repeats (a bad group value is
// reported once, not once per host).
type problems struct {
	list []Problem
	seen map[string]bool
}

func (ps *problems) add(p Problem) {
	if ps.seen == nil {
		ps.seen = map[string]bool{}
	}
	k := fmt.Sprintf("%d:%d:%s:%s:%s", p.Line, p.Column, p.Key, p.Message, p.Origin)
	if p.Line == 0 {
		k += ":" + p.Host
	}
	if ps.seen[k] {
		return
	}
	ps.seen[k] = true
	ps.list = append(ps.list, p)
}

// note appends text to the message of every problem from index from on.
func (ps *problems) note(from int, text string) {
	for i := from; i < len(ps.list); i++ {
		ps.list[i].Message += text
	}
}

func (ps *problems) empty() bool { return len(ps.list) == 0 }

// sorted returns the problems in file order (file-level problems without a
// line last, in the order found).
func (ps *problems) sorted() []Problem {
	out := append([]Problem{}, ps.list...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.Line == 0) != (b.Line == 0) {
			return a.Line != 0
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return out
}

// errorOf is the usage-class error carrying every problem of the
// inventory named name (as the user named it: its -f argument).
func errorOf(list []Problem, name string) *exitcode.Error {
	msg := list[0].String()
	if n := len(list) - 1; n == 1 {
		msg += " (and 1 more problem)"
	} else if n > 1 {
		msg += fmt.Sprintf(" (and %d more problems)", n)
	}
	e := exitcode.New(exitcode.Usage, "%s", msg).WithReason("invalid_inventory").WithDetail(list)
	// Stdin cannot be read twice, and "-f <stdin>" would be a shell
	// redirection: only a named inventory gets the hint, and always the
	// inventory, never the file of the first problem (a vars file, or a
	// file of an inventory directory, read as an inventory of its own
	// would read something else).
	if len(list) > 1 && name != "" && name != "-" && name != "<stdin>" {
		e = e.WithNext("barn-inventory validate -f " + quote.ShellIfNeeded(name))
	}
	return e
}

// Problems returns the problem list carried by an error from this package,
// or nil.
func Problems(err error) []Problem {
	e := exitcode.As(err)
	if e == nil {
		return nil
	}
	if l, ok := e.Detail.([]Problem); ok {
		return l
	}
	return nil
}
