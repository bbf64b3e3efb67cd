package testscripts

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Start-up budget (issue 19): a tool's `version` and `--help` spend at most
// 3 ms in package init. Wall time on a shared 2-core machine is noise, so
// the contract is bounded by what init allocates, which is what init time
// here is made of (compiled regexps, parsed keys, decoded tables) and which
// no load on the machine changes:
//
//   - Barn's own packages together allocate at most ownInitBudget bytes:
//     their expensive values are built on first use (lib/lazyre, the
//     official repository's keys);
//   - all packages together, third-party ones included, at most
//     totalInitBudget. gojq's builtin table (about 214 KiB) is most of
//     it; before this budget barn-node allocated 1.6 MB in init.
const (
	ownInitBudget   = 8 << 10
	totalInitBudget = 448 << 10
)

// initCost is one package's line of GODEBUG=inittrace=1.
type initCost struct {
	pkg     string
	clockMS float64
	bytes   int
}

// buildTools builds every tool into a temporary directory, as `make build`
// does (one go build), and returns the directory.
func buildTools(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	// One go build for all of them: the tools link side by side.
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for name := range Tools {
		args = append(args, "barn.dev/"+name)
	}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, out)
	}
	return dir
}

// initTrace runs bin with args under GODEBUG=inittrace=1 and returns the
// init cost of every package it reports.
func initTrace(t *testing.T, bin string, args ...string) []initCost {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1", "HOME="+t.TempDir())
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	var out []initCost
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		// init PKG @T ms, C ms clock, B bytes, A allocs
		f := strings.Fields(sc.Text())
		if len(f) != 11 || f[0] != "init" || f[10] != "allocs" {
			continue
		}
		clock, err1 := strconv.ParseFloat(f[4], 64)
		b, err2 := strconv.Atoi(f[7])
		if err1 != nil || err2 != nil {
			t.Fatalf("unparsable inittrace line %q", sc.Text())
		}
		out = append(out, initCost{pkg: f[1], clockMS: clock, bytes: b})
	}
	if len(out) == 0 {
		t.Fatalf("%s printed no inittrace lines", filepath.Base(bin))
	}
	return out
}

func TestStartupInitBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every tool")
	}
	dir := buildTools(t)
	names := make([]string, 0, len(Tools))
	for name := range Tools {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, args := range [][]string{{"version"}, {"--help"}} {
			costs := initTrace(t, filepath.Join(dir, name), args...)
			var own, total int
			var clock float64
			var ownPkgs []string
			for _, c := range costs {
				total += c.bytes
				clock += c.clockMS
				if strings.HasPrefix(c.pkg, "barn.dev/") && c.bytes > 0 {
					own += c.bytes
					ownPkgs = append(ownPkgs, c.pkg+" "+strconv.Itoa(c.bytes))
				}
			}
			t.Logf("%s %s: init allocates %d bytes (Barn's %d), %.2f ms clock", name, args[0], total, own, clock)
			if own > ownInitBudget {
				t.Errorf("%s %s: Barn's packages allocate %d bytes in init (budget %d): %s",
					name, args[0], own, ownInitBudget, strings.Join(ownPkgs, ", "))
			}
			if total > totalInitBudget {
				t.Errorf("%s %s: init allocates %d bytes (budget %d)", name, args[0], total, totalInitBudget)
			}
		}
	}
}
