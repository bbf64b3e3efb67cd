package spec

import (
	"strings"

	"barn.dev/lib/quote"
)

// Pipeline is the command line that resolves again the inventory a spec
// was read from (source: spec.Spec.Source), plans it and hands the plan to
// tail, e.g. Pipeline("pigsty.yml", "barn-node apply") is
//
//	barn-inventory resolve -f pigsty.yml | barn-plan | barn-node apply
//
// It is the next: hint of every state whose settling needs a fresh plan,
// so it must work as printed: a source that is empty or stdin gives the
// discovery form (`barn-inventory resolve` finds barn.yml, barn.yaml,
// pigsty.yml or pigsty.yaml in the working directory); a relative source
// is relative to where it was resolved. An empty tail stops at barn-plan.
func Pipeline(source, tail string) string { return PlanPipeline(source, nil, tail) }

// PlanPipeline is Pipeline with barn-plan given planArgs (node selectors
// and per-command overrides, each quoted for the shell when it needs it),
// so that a hint keeps the selection and overrides of the plan it came
// from.
func PlanPipeline(source string, planArgs []string, tail string) string {
	resolve := "barn-inventory resolve"
	if source != "" && source != "-" && !strings.HasPrefix(source, "<") {
		resolve += " -f " + quote.ShellIfNeeded(source)
	}
	line := resolve + " | barn-plan"
	for _, a := range planArgs {
		line += " " + quote.ShellIfNeeded(a)
	}
	if tail != "" {
		line += " | " + tail
	}
	return line
}
