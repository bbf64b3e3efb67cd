package hostnet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/safefile"
)

// FaultTable is the name of Barn's nftables table (family bridge) for
// the faults of bridge: the only table barn-net fault creates, rewrites or
// deletes for that network. One per bridge, because each network records
// its own faults (its own faults.json and lock) and rewrites its table
// whole: barn0's is barn_faults_barn0. Every byte of the bridge name that
// is not an ASCII letter or digit is written _xx (hex), so the name is an
// nft identifier and no two bridges share a table.
func FaultTable(bridge string) string {
	var b strings.Builder
	b.WriteString("barn_faults_")
	for _, c := range []byte(bridge) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "_%02x", c)
		}
	}
	return b.String()
}

// faultComment marks a table Barn created.
const faultComment = "barn-net fault: removed by barn-net fault heal"

// faultRuleset renders the nft script that makes the kernel's table named
// table exactly the record's faults: declare, delete and re-create the table in one
// transaction (nft -f applies a file atomically), or only declare and
// delete it when no fault needs a rule. Each rule carries its fault's ID
// as comment. Rules match node addresses only, both ends in the
// deployment's /24, which install proved no other interface of this
// namespace carries: they act on Barn's bridge alone. (meta ibrname would
// name the bridge, but needs CONFIG_NFT_BRIDGE_META, which not every
// kernel has; this repository's CI kernel has not.)
func faultRuleset(table string, faults []Fault) string {
	var fwd, in, out []string
	for _, f := range faults {
		if f.State == FaultHealing {
			continue
		}
		c := fmt.Sprintf(" drop comment %q", "barn-fault "+f.ID)
		switch f.Kind {
		case FaultIsolate:
			x := addrSet(f.A)
			fwd = append(fwd, "ip saddr "+x+c, "ip daddr "+x+c)
			in = append(in, "ip saddr "+x+c)
			out = append(out, "ip daddr "+x+c)
		case FaultPartition:
			a, b := addrSet(f.A), addrSet(f.B)
			fwd = append(fwd, "ip saddr "+a+" ip daddr "+b+c)
			if !f.OneWay {
				fwd = append(fwd, "ip saddr "+b+" ip daddr "+a+c)
			}
		}
	}
	var s strings.Builder
	fmt.Fprintf(&s, "table bridge %s\ndelete table bridge %s\n", table, table)
	if len(fwd)+len(in)+len(out) == 0 {
		return s.String()
	}
	fmt.Fprintf(&s, "table bridge %s {\n\tcomment %q\n", table, faultComment)
	for _, ch := range []struct {
		name  string
		rules []string
	}{{"forward", fwd}, {"input", in}, {"output", out}} {
		fmt.Fprintf(&s, "\tchain %s {\n\t\ttype filter hook %s priority filter; policy accept;\n", ch.name, ch.name)
		for _, r := range ch.rules {
			fmt.Fprintf(&s, "\t\t%s\n", r)
		}
		s.WriteString("\t}\n")
	}
	s.WriteString("}\n")
	return s.String()
}

// faultRuleCount is how many rules faultRuleset writes for f.
func faultRuleCount(f Fault) int {
	switch {
	case f.Kind == FaultIsolate:
		return 4
	case f.Kind == FaultPartition && f.OneWay:
		return 1
	case f.Kind == FaultPartition:
		return 2
	}
	return 0
}

func addrSet(ms []Member) string {
	a := []string{}
	for _, m := range ms {
		a = append(a, m.Address)
	}
	return "{ " + strings.Join(a, ", ") + " }"
}

// listFaultTable returns the table as `nft list` prints it, "" when it
// does not exist.
func (h *Host) listFaultTable(ctx context.Context) (string, error) {
	out, err := h.Runner.Run(ctx, []string{"nft", "list", "table", "bridge", FaultTable(h.Bridge)})
	if err != nil {
		if strings.Contains(string(out), "No such file or directory") {
			return "", nil
		}
		return "", faultToolError(err, out, "nft list table bridge "+FaultTable(h.Bridge))
	}
	return string(out), nil
}

// syncFaultTable makes the table exactly the record's faults. A table of
// that name Barn did not create (no Barn comment) is refused, never
// replaced.
func (h *Host) syncFaultTable(ctx context.Context, faults []Fault) error {
	cur, err := h.listFaultTable(ctx)
	if err != nil {
		return err
	}
	if cur != "" && !strings.Contains(cur, faultComment) {
		return exitcode.New(exitcode.Conflict, "nftables table bridge %s exists and is not Barn's (no Barn comment); Barn does not touch it", FaultTable(h.Bridge)).
			WithReason("fault_table_foreign").WithNext("nft list table bridge " + FaultTable(h.Bridge))
	}
	script := faultRuleset(FaultTable(h.Bridge), faults)
	if cur == "" && !strings.Contains(script, "{") {
		return nil // nothing to remove, nothing to add
	}
	dir, err := os.MkdirTemp("", "barn-faults-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir) // private: made just above
	file := filepath.Join(dir, "faults.nft")
	if err := safefile.Write(file, []byte(script), 0o600); err != nil {
		return err
	}
	if out, err := h.Runner.Run(ctx, []string{"nft", "-f", file}); err != nil {
		return faultToolError(err, out, "nft -f (Barn's fault table)")
	}
	return nil
}

// faultToolError classifies a failed nft or tc: missing tool is capability
// (faults_unsupported), anything else runtime with the tool's output.
func faultToolError(err error, out []byte, what string) error {
	var nf *fs.PathError
	if errors.As(err, &nf) || strings.Contains(err.Error(), "executable file not found") {
		return exitcode.Wrap(exitcode.Capability, err, "%s", what).WithReason("faults_unsupported").
			WithNext("apt-get install nftables iproute2")
	}
	return exitcode.New(exitcode.Runtime, "%s: %v: %s", what, err, strings.TrimSpace(string(out))).WithReason("fault_apply_failed")
}
