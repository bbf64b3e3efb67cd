package repository

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/imagecache"
	"barn.dev/lib/wire"
)

// barn09Repository lays out Barn 0.9's published repository: its repo.yaml
// (testdata/barn09) and one small generated qcow2 per artifact, each of a
// different virtual size. It returns the root and the catalog.json Barn 0.9
// writes for it: 0.9's own published catalog bytes with only the measured
// values (sha256, artifact_size, virtual_size) replaced by the generated
// images' — everything else, layout included, is 0.9's.
func barn09Repository(t *testing.T) (string, []byte) {
	t.Helper()
	yaml, err := os.ReadFile("testdata/barn09/repo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	root := emptyRepo(t, yaml)
	published, err := os.ReadFile("../catalog/official/catalog.json") // Barn 0.9's, byte for byte
	if err != nil {
		t.Fatal(err)
	}
	pub, err := catalog.DecodeCatalog(published, "0.9 catalog")
	if err != nil {
		t.Fatal(err)
	}
	measured := map[string]imagecache.Measured{}
	for i, id := range pub.Identities() {
		p := filepath.Join(root, filepath.FromSlash(id.File))
		size := fmt.Sprintf("%dK", 1024+64*i)
		if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", p, size).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		m, err := imagecache.MeasureFile(p)
		if err != nil {
			t.Fatal(err)
		}
		measured[id.File] = m
	}
	return root, substituteMeasured(t, published, measured)
}

var (
	fileRE    = regexp.MustCompile(`"file": "([^"]+)"`)
	sha256RE  = regexp.MustCompile(`"sha256": "[0-9a-f]{64}"`)
	artSizeRE = regexp.MustCompile(`"artifact_size": [0-9]+`)
	virtRE    = regexp.MustCompile(`"virtual_size": [0-9]+`)
)

// substituteMeasured rewrites the three measured values of every variant in
// catalog text laid out as 0.9 lays it out (one field per line, "file"
// first in each variant), leaving every other byte alone.
func substituteMeasured(t *testing.T, text []byte, m map[string]imagecache.Measured) []byte {
	t.Helper()
	starts := fileRE.FindAllSubmatchIndex(text, -1)
	if len(starts) != len(m) {
		t.Fatalf("%d variants in the text, %d measured", len(starts), len(m))
	}
	var out bytes.Buffer
	prev := 0
	for i, s := range starts {
		end := len(text)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		out.Write(text[prev:s[0]])
		meas := m[string(text[s[2]:s[3]])]
		chunk := text[s[0]:end]
		for _, r := range []struct {
			re  *regexp.Regexp
			val string
		}{
			{sha256RE, fmt.Sprintf(`"sha256": %q`, meas.SHA256)},
			{artSizeRE, fmt.Sprintf(`"artifact_size": %d`, meas.SizeBytes)},
			{virtRE, fmt.Sprintf(`"virtual_size": %d`, meas.Header.VirtualSize)},
		} {
			loc := r.re.FindIndex(chunk)
			if loc == nil {
				t.Fatalf("variant %s has no %s", text[s[2]:s[3]], r.re)
			}
			chunk = append(append(append([]byte{}, chunk[:loc[0]]...), r.val...), chunk[loc[1]:]...)
		}
		out.Write(chunk)
		prev = end
	}
	return out.Bytes()
}

// Barn 0.9's repository builds to exactly the bytes 0.9 writes, and verify
// and build accept it as published.
func TestBarn09RepositoryBuildsByteForByte(t *testing.T) {
	root, want := barn09Repository(t)
	_, got, _, _, err := Generate(context.Background(), root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("build output differs from Barn 0.9's layout at byte %d:\n%s", firstDiff(got, want), context3(got, want))
	}
	if err := os.WriteFile(filepath.Join(root, "catalog.json"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := Verify(context.Background(), root, Options{})
	if err != nil || !v.Canonical {
		t.Fatalf("verify of a 0.9 repository: %+v %v", v, err)
	}
	b, err := Build(context.Background(), root, Options{})
	if err != nil || b.Changed || !b.Canonical {
		t.Fatalf("build over a 0.9 repository: %+v %v", b, err)
	}
}

// Issue 14 case 3: a catalog that says the same thing in another layout
// (keys sorted, inherited fields written out, as earlier Barn builds wrote
// it) is not stale, and build keeps its bytes: rewriting them at the same
// revision would be equivocation to every client that accepted them. A
// real change is still stale, and only the real change is named.
func TestOtherLayoutIsNotStale(t *testing.T) {
	root, want := barn09Repository(t)
	c, err := catalog.DecodeCatalog(want, "catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	other, err := wire.MarshalIndent(c.Materialized())
	if err != nil {
		t.Fatal(err)
	}
	other = append(other, '\n')
	if bytes.Equal(other, want) || !bytes.Contains(other, []byte(`"boot": "uefi",`+"\n"+`              "file"`)) {
		t.Fatal("the other layout is not different (the test proves nothing)")
	}
	path := filepath.Join(root, "catalog.json")
	if err := os.WriteFile(path, other, 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := Verify(context.Background(), root, Options{})
	if err != nil || v.Canonical {
		t.Fatalf("verify of an equivalent catalog in another layout: %+v %v", v, err)
	}
	b, err := Build(context.Background(), root, Options{})
	if err != nil || b.Changed || b.Canonical {
		t.Fatalf("build over an equivalent catalog: %+v %v", b, err)
	}
	if kept, _ := os.ReadFile(path); !bytes.Equal(kept, other) {
		t.Fatal("build rewrote an equivalent catalog at the same revision")
	}

	yaml, _ := os.ReadFile(filepath.Join(root, "repo.yaml"))
	moved := strings.Replace(string(yaml), `stable: "9.8.20260525.1"`, `stable: "9.7.20251123.2"`, 1)
	if moved == string(yaml) {
		t.Fatal("el9's stable channel not found in repo.yaml")
	}
	if err := os.WriteFile(filepath.Join(root, "repo.yaml"), []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Verify(context.Background(), root, Options{})
	e := exitcode.As(err)
	diffs, _ := e.Detail.([]string)
	if e.Reason != "catalog_stale" || len(diffs) != 1 || !strings.HasPrefix(diffs[0], "images.el9.channels.stable:") {
		t.Fatalf("a moved channel: %v (diffs %q)", err, diffs)
	}
}

func firstDiff(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func context3(a, b []byte) string {
	i := firstDiff(a, b)
	lo := max(0, i-200)
	return fmt.Sprintf("got:  …%s…\nwant: …%s…", a[lo:min(len(a), i+100)], b[lo:min(len(b), i+100)])
}
