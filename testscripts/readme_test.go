package testscripts

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	inventory "barn.dev/barn-inventory/cli"
	net "barn.dev/barn-net/cli"
	node "barn.dev/barn-node/cli"
	plan "barn.dev/barn-plan/cli"
	repo "barn.dev/barn-repo/cli"
	state "barn.dev/barn-state/cli"
	"barn.dev/lib/tool"
)

// mains are the tools' in-process entry points, by name.
var mains = map[string]func(context.Context, []string, tool.Stdio, func(string) string) int{
	"barn-inventory": inventory.Main, "barn-plan": plan.Main, "barn-node": node.Main,
	"barn-net": net.Main, "barn-repo": repo.Main, "barn-state": state.Main,
}

// helpCommand is one line of a tool's --help command list: "  status (st)   Show…",
// "  hosts install (i)   Publish…" or "  snapshot (snap) list (ls)   List…"
// (an alias may follow any word of the path).
var helpCommand = regexp.MustCompile(`^  ([a-z][a-z0-9-]*(?: \([^)]*\))?(?: [a-z][a-z0-9-]*(?: \([^)]*\))?)*)\s{2,}\S`)

// helpAlias is one parenthesized alias list inside a helpCommand path.
var helpAlias = regexp.MustCompile(` ?\(([^)]*)\)`)

// helpWords returns every command word a tool's --help lists (nested
// commands contribute each word) and every alias, and the commands that
// have subcommands.
func helpWords(t *testing.T, name string) (words, parents map[string]bool) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := mains[name](context.Background(), []string{"--help"}, tool.Stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, os.Getenv); code != 0 {
		t.Fatalf("%s --help exited %d: %s", name, code, errb.String())
	}
	words, parents = map[string]bool{}, map[string]bool{}
	in := false
	for _, l := range strings.Split(out.String(), "\n") {
		switch {
		case l == "Commands:":
			in = true
		case in && l == "":
			in = false
		case in:
			if m := helpCommand.FindStringSubmatch(l); m != nil {
				path := strings.Fields(helpAlias.ReplaceAllString(m[1], ""))
				for _, w := range path {
					words[w] = true
				}
				if len(path) > 1 {
					parents[path[0]] = true
				}
				for _, am := range helpAlias.FindAllStringSubmatch(m[1], -1) {
					for _, a := range strings.Split(am[1], ",") {
						if a = strings.TrimSpace(a); a != "" {
							words[a] = true
						}
					}
				}
			}
		}
	}
	if len(words) == 0 {
		t.Fatalf("%s --help lists no commands:\n%s", name, out.String())
	}
	return words, parents
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// rowWords returns the command words a README table cell names: the first
// word of every code span and the alternatives after it (`hosts
// install\|uninstall`, `i`/`u`), leaving out flags and, for a command
// that takes arguments (`init meta\|dual`, `query EXPR`), its arguments,
// and paths.
func rowWords(cell string, parents map[string]bool) map[string]bool {
	words := map[string]bool{}
	for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
		f := strings.Fields(strings.ReplaceAll(m[1], `\|`, "|"))
		if len(f) == 0 || strings.HasPrefix(f[0], "-") || strings.HasPrefix(f[0], "/") {
			continue // a flag or a path
		}
		for _, w := range strings.Split(f[0], "/") {
			words[w] = true
		}
		if len(f) > 1 && parents[f[0]] {
			for _, w := range strings.Split(f[1], "|") {
				words[w] = true
			}
		}
	}
	return words
}

// TestReadmeCommandTable: the README's command table names exactly the
// commands and aliases each tool's --help lists (the "every tool" row
// holding version, its alias and completion), so the table cannot fall
// behind the grammar.
func TestReadmeCommandTable(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		cells := strings.Split(l, " | ")
		if len(cells) == 2 && strings.HasPrefix(cells[0], "| ") {
			rows[strings.Trim(strings.TrimPrefix(cells[0], "| "), "`")] = strings.TrimSuffix(cells[1], " |")
		}
	}
	every, ok := rows["every tool"]
	if !ok {
		t.Fatal(`README has no "every tool" row in its command table`)
	}
	for name := range mains {
		row, ok := rows[name]
		if !ok {
			t.Errorf("README's command table has no row for %s", name)
			continue
		}
		help, parents := helpWords(t, name)
		named := rowWords(row, parents)
		for w := range rowWords(every, nil) {
			named[w] = true
		}
		var missing, unknown []string
		for w := range help {
			if !named[w] {
				missing = append(missing, w)
			}
		}
		for w := range named {
			if !help[w] {
				unknown = append(unknown, w)
			}
		}
		sort.Strings(missing)
		sort.Strings(unknown)
		if len(missing) > 0 {
			t.Errorf("README's %s row omits %v (listed by %s --help)", name, missing, name)
		}
		if len(unknown) > 0 {
			t.Errorf("README's %s row names %v, which %s --help does not list", name, unknown, name)
		}
	}
}
