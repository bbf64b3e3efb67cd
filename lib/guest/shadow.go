package guest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/lazyre"
)

// Shadow is a block of the user's ssh configuration that already answers
// for a name Barn's fragment would add: installing the fragment at the
// top of ~/.ssh/config would silently take that name over.
type Shadow struct {
	Name  string `json:"name"`
	File  string `json:"file"`
	Line  int    `json:"line"`  // 0 when ssh names no line (a Match it reports without one)
	Block string `json:"block"` // "Host PATTERN" or "Match CRITERIA", as ssh reports it
	// Route is set for a block that answers for every name: where ssh
	// sends this one today ("hostname H, port P, proxyjump J").
	Route string `json:"route,omitempty"`
	// conditional: a Match without host terms whose block routes, which
	// answers for every name under a condition (user, exec…).
	conditional bool
}

// systemSSHConfig is the file ssh reads after the user's configuration.
const systemSSHConfig = "/etc/ssh/ssh_config"

// ShadowedNames asks the local ssh (sshBin; "" is ssh on PATH; none
// installed: nothing to check, like CheckFragmentParses) which of names
// the user's configuration already answers for, as ssh itself resolves
// it without Barn's Include: for each name, `ssh -G -vvv -F COPY NAME`,
// where COPY is p.Config (followed through a symlink; missing is empty)
// with Barn's marked Include blanked line for line, then the system
// configuration (`Match all` + `Include /etc/ssh/ssh_config`), which is
// what ssh reads without -F. A Host line whose matching pattern is not
// "*" answers for the name; so does — conservatively — a Match whose
// host/originalhost terms all match the name, one of them not "*",
// whatever its user, localuser, exec or other criteria say, applied now or
// not (matchBlock.answers): those change with the login user, the local
// account or what an exec looks at, and the user's block would then take
// the name back. A Match without host terms answers when ssh applies it
// and it is not `Match all`. Blocks that answer for every name single
// nothing out, unless they route the name elsewhere (see shadowsOf). A
// Match exec command runs, as it would for any ssh to that name. Shadows name the file and line ssh reports (COPY
// mapped back to p.Config), in names order then file order.
func ShadowedNames(ctx context.Context, sshBin string, p SSHConfigPaths, names []string) ([]Shadow, error) {
	if sshBin == "" {
		sshBin = "ssh"
	}
	path, err := exec.LookPath(sshBin)
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Capability, err, "finding the ssh client %s", sshBin)
	}
	dir, err := os.MkdirTemp("", "barn-ssh-shadow-")
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "checking ssh names")
	}
	defer os.RemoveAll(dir)
	copyPath := filepath.Join(dir, "config")
	if err := writeUserCopy(p, copyPath); err != nil {
		return nil, err
	}
	var out []Shadow
	for _, name := range names {
		found, err := shadowsOf(ctx, path, copyPath, name)
		if err != nil {
			return nil, err
		}
		for _, s := range found {
			if s.File == copyPath {
				s.File = p.Config
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// writeUserCopy writes p.Config without Barn's marked Include (its lines
// blanked, so line numbers stay) and then the system configuration.
func writeUserCopy(p SSHConfigPaths, dst string) error {
	b, err := os.ReadFile(p.Config)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return exitcode.Wrap(exitcode.Runtime, err, "read %s: %v", p.Config, err)
	}
	if len(b) > maxConfigBytes {
		return exitcode.New(exitcode.Conflict, "%s is larger than 1 MiB", p.Config).WithReason("ssh_config_too_large")
	}
	lines := splitLines(b)
	if include, err := p.IncludeLine(); err == nil {
		if i := markedInclude(lines, include); i >= 0 {
			lines[i], lines[i+1] = "#", "#"
		}
	}
	if _, err := os.Stat(systemSSHConfig); err == nil {
		lines = append(lines, "Match all", "Include "+systemSSHConfig)
	}
	if err := os.WriteFile(dst, joinLines(lines), 0o600); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "checking ssh names")
	}
	return nil
}

var (
	readingRE  = lazyre.New(`^debug\d: Reading configuration data (.+)$`)
	applyingRE = lazyre.New(`^debug\d: (.+) line (\d+): Applying options for (.+)$`)
	checkRE    = lazyre.New(`^debug\d: checking match for '(.*)' host .* originally .*$`)
	termRE     = lazyre.New(`^debug\d: (.+) line (\d+): (not )?matched '(!?)([A-Za-z]+)`)
	everyRE    = lazyre.New(`(?i)^(?:all|(?:(?:host|originalhost) "?\*"?\s*)+)$`)
)

// matchBlock is what ssh -vvv reported of one Match line for a name.
type matchBlock struct {
	criteria, file string
	line           int
	hostTerms      int  // host/originalhost terms ssh evaluated
	hostFailed     bool // one of them did not match
}

// answers reports whether the Match answers for the name. When its
// host/originalhost terms all match, they decide: it answers when one of
// them picks names out (singlesOut), whatever its user, localuser, exec,
// canonical, final or other criteria say now — those may change with the
// login user, the local account or the state an exec looks at. A Match
// without host terms (user, localuser, exec, canonical, final) answers
// when its block routes connections (setsRoute), whether ssh applies it
// now or not: `Match exec "test -e ~/.offvpn"` with a ProxyJump, or
// `Match user admin` with a HostName, sends the name to the user's
// machines under a condition the check cannot see; one that only sets,
// say, an IdentityFile answers for nothing. `Match all` is a catch-all.
func (m matchBlock) answers(found bool) bool {
	if m.hostTerms > 0 {
		return !m.hostFailed && singlesOut(m.criteria)
	}
	return !everyRE.MatchString(m.criteria) && setsRoute(m.file, m.line)
}

// singlesOut reports whether criteria (a Match line's) hold a host or
// originalhost term, not negated, whose pattern list has no plain "*"
// (which every name matches).
func singlesOut(criteria string) bool {
	words := strings.Fields(strings.ReplaceAll(criteria, `"`, " "))
	for i := 0; i+1 < len(words); i++ {
		if a := strings.ToLower(words[i]); a == "host" || a == "originalhost" {
			if !slices.Contains(strings.Split(words[i+1], ","), "*") {
				return true
			}
			i++
		}
	}
	return false
}

// shadowsOf reads ssh's own account of the blocks it applies for name,
// and of the host terms of every Match it checks. A block that answers
// for every name (Host *, Match all) singles nothing out, but when what
// ssh resolves for name goes somewhere else than ssh's own default (the
// name itself on port 22, direct: a catch-all "HostName %h.corp", a
// ProxyJump for every host), the name already reaches a machine of the
// user's, and Barn's Include would take it over: each catch-all block
// applied is then a shadow, its Route saying where ssh sends the name.
func shadowsOf(ctx context.Context, ssh, config, name string) ([]Shadow, error) {
	resolved, trace, err := sshResolve(ctx, ssh, config, name)
	if err != nil {
		return nil, err
	}
	_, unrelatedTrace, err := sshResolve(ctx, ssh, config, unrelatedName)
	if err != nil {
		return nil, err
	}
	specific, catchAll := appliedBlocks(name, trace)
	everyName, _ := appliedBlocks(unrelatedName, unrelatedTrace)
	var only []Shadow
	for _, s := range specific {
		if !s.conditional && slices.ContainsFunc(everyName, func(e Shadow) bool { return e.File == s.File && e.Line == s.Line }) {
			catchAll = append(catchAll, s) // it answers for an unrelated name too (Host ?*)
		} else {
			only = append(only, s)
		}
	}
	if len(only) > 0 {
		for i, s := range only {
			if s.conditional { // every name, when its condition holds
				only[i].Route = "when " + strings.TrimPrefix(s.Block, "Match ") + ": " + blockRoute(s.File, s.Line)
			}
		}
		return only, nil
	}
	plain, _, err := sshResolve(ctx, ssh, os.DevNull, name)
	if err != nil {
		return nil, err
	}
	r := route(resolved)
	if r == route(plain) {
		return nil, nil
	}
	var out []Shadow
	for _, s := range catchAll {
		if setsRoute(s.File, s.Line) && !slices.ContainsFunc(out, func(o Shadow) bool { return o.File == s.File && o.Line == s.Line }) {
			out = append(out, s)
		}
	}
	for _, line := range topLevelRoute(config) {
		out = append(out, Shadow{Name: name, File: config, Line: line, Block: "(before any Host or Match)"})
	}
	if len(out) == 0 { // set through an Include, or a block ssh reports without a line
		out = []Shadow{{Name: name, File: config, Block: "Host *"}}
	}
	for i := range out {
		out[i].Route = r
	}
	return out, nil
}

// unrelatedName is a name no configuration singles out: a block that
// applies to it applies to every name.
const unrelatedName = "barn-unrelated-name.invalid"

// topLevelRoute returns the lines of file, before its first Host or Match
// line, that set a route keyword: they apply to every name.
func topLevelRoute(file string) []int {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var out []int
	for i, l := range splitLines(b) {
		if blockStartRE.MatchString(l) {
			break
		}
		if routeKeywordRE.MatchString(l) {
			out = append(out, i+1)
		}
	}
	return out
}

// blockStartRE matches the line that opens a Host or Match block.
var blockStartRE = lazyre.New(`(?i)^\s*(host|match)(\s|=)`)

// routeKeywordRE matches an ssh_config line setting where a connection goes.
var routeKeywordRE = lazyre.New(`(?i)^\s*(hostname|port|proxyjump|proxycommand)(\s|=)`)

// setsRoute reports whether the block opened at file:line (1-based) sets
// HostName, Port, ProxyJump or ProxyCommand itself (blockRoute).
func setsRoute(file string, line int) bool { return blockRoute(file, line) != "" }

// blockRoute returns the route-setting lines (HostName, Port, ProxyJump,
// ProxyCommand) of the block opened at file:line (1-based), up to the
// next Host or Match line, joined by ", "; "" when it sets none. A block
// without a line (0) sets none: the Match all Barn appends before the
// system configuration is one.
func blockRoute(file string, line int) string {
	b, err := os.ReadFile(file)
	if err != nil || line == 0 {
		return ""
	}
	lines := splitLines(b)
	var r []string
	for i := line; i < len(lines); i++ {
		if blockStartRE.MatchString(lines[i]) {
			break
		}
		if routeKeywordRE.MatchString(lines[i]) {
			r = append(r, strings.Join(strings.Fields(lines[i]), " "))
		}
	}
	return strings.Join(r, ", ")
}

// sshResolve runs `ssh -G -vvv -F config -- name`: its resolved options
// (stdout) and its trace of the blocks it checked (stderr).
func sshResolve(ctx context.Context, ssh, config, name string) (resolved, trace string, err error) {
	ctx, cancel := context.WithTimeout(ctx, sshCheckTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, ssh, "-G", "-vvv", "-F", config, "--", name)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", "", exitcode.New(exitcode.Capability, "%s cannot read your ssh configuration for %s (%v): %s", ssh, name, err, lastLine(stderr.String())).
			WithReason("ssh_config_unreadable").WithNext("ssh -G " + name + "   # shows ssh's own error")
	}
	return stdout.String(), stderr.String(), nil
}

// appliedBlocks splits the blocks of an ssh -vvv trace for name into
// those that answer for it (a Host pattern other than "*", a Match that
// singles it out: matchBlock.answers) and the catch-all ones ssh applied.
func appliedBlocks(name, trace string) (specific, catchAll []Shadow) {
	var m matchBlock
	var lineless lineless
	sc := bufio.NewScanner(strings.NewReader(trace))
	for sc.Scan() {
		t := strings.TrimRight(sc.Text(), "\r ")
		switch {
		case readingRE.MatchString(t):
			lineless.file = readingRE.FindStringSubmatch(t)[1]
		case applyingRE.MatchString(t):
			a := applyingRE.FindStringSubmatch(t)
			n, _ := strconv.Atoi(a[2])
			s := Shadow{Name: name, File: a[1], Line: n, Block: "Host " + a[3]}
			if a[3] == "*" {
				catchAll = append(catchAll, s)
			} else {
				specific = append(specific, s)
			}
		case checkRE.MatchString(t):
			m = matchBlock{criteria: checkRE.FindStringSubmatch(t)[1]}
		case termRE.MatchString(t):
			a := termRE.FindStringSubmatch(t)
			m.file = a[1]
			m.line, _ = strconv.Atoi(a[2])
			if attr := strings.ToLower(a[5]); attr == "host" || attr == "originalhost" {
				m.hostTerms++
				m.hostFailed = m.hostFailed || a[3] != ""
			}
		case t == "debug2: match found" || t == "debug2: match not found":
			found := t == "debug2: match found"
			if m.file == "" {
				m.file, m.line = lineless.locate(m.criteria)
			}
			s := Shadow{Name: name, File: m.file, Line: m.line, Block: "Match " + m.criteria, conditional: m.hostTerms == 0}
			if m.answers(found) {
				specific = append(specific, s)
			} else if found && (m.hostTerms > 0 || everyRE.MatchString(m.criteria)) {
				catchAll = append(catchAll, s)
			}
			m = matchBlock{}
		}
	}
	return specific, catchAll
}

// lineless finds the line of a Match ssh -vvv reports without one (Match
// all): the next line of the file ssh last said it read that spells the
// same criteria, after those found before.
type lineless struct {
	file string
	next map[string]int // file+criteria → the line after the last found
}

func (l *lineless) locate(criteria string) (string, int) {
	b, err := os.ReadFile(l.file)
	if err != nil {
		return l.file, 0
	}
	if l.next == nil {
		l.next = map[string]int{}
	}
	key := l.file + "\x00" + criteria
	lines := splitLines(b)
	for i := l.next[key]; i < len(lines); i++ {
		kw, rest, _ := strings.Cut(strings.TrimSpace(lines[i]), " ")
		if strings.EqualFold(kw, "match") && strings.Join(strings.Fields(rest), " ") == criteria {
			l.next[key] = i + 1
			return l.file, i + 1
		}
	}
	return l.file, 0
}

// route is where ssh's resolved options (ssh -G output) send a
// connection: its hostname, port, proxyjump and proxycommand lines.
func route(resolved string) string {
	var r []string
	for _, l := range strings.Split(resolved, "\n") {
		k, _, _ := strings.Cut(l, " ")
		switch k {
		case "hostname", "port", "proxyjump", "proxycommand":
			r = append(r, l)
		}
	}
	return strings.Join(r, ", ")
}

// SplitShadows separates the blocks that single a name out (claimed: a
// refusal, ShadowError) from those that answer for every name and route
// it elsewhere (routed: Route set). A catch-all is no evidence that the
// user uses that name — a global ProxyJump or "HostName %h.corp" covers
// every name — so the install goes ahead and names each routed block,
// rather than refusing every node of every such user.
func SplitShadows(shadows []Shadow) (claimed, routed []Shadow) {
	for _, s := range shadows {
		if s.Route != "" {
			routed = append(routed, s)
		} else {
			claimed = append(claimed, s)
		}
	}
	return claimed, routed
}

// ShadowError is the refusal for shadows: each with file:line, and the
// way out (edit those blocks, or leave the names out with --exclude, after
// the names excluded already).
func ShadowError(shadows []Shadow, excluded []string) error {
	var each, excl []string
	seen := map[string]bool{}
	for _, n := range excluded {
		seen[n] = true
		excl = append(excl, "--exclude "+n)
	}
	for _, s := range shadows {
		if s.Route != "" {
			each = append(each, fmt.Sprintf("%s:%d: %s sends %s to %s", s.File, s.Line, s.Block, s.Name, s.Route))
		} else {
			each = append(each, fmt.Sprintf("%s:%d: %s answers for %s", s.File, s.Line, s.Block, s.Name))
		}
		if !seen[s.Name] {
			seen[s.Name] = true
			excl = append(excl, "--exclude "+s.Name)
		}
	}
	return exitcode.New(exitcode.Conflict, "your ssh configuration already uses names Barn would add, and Barn's Include would take them over: %s", strings.Join(each, "; ")).
		WithReason("ssh_name_shadowed").WithDetail(shadows).
		WithNext("barn-node ssh-config --install " + strings.Join(excl, " ") + "   # or rename those Host/Match blocks")
}
