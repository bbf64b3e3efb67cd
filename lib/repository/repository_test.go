package repository

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
)

const repoYAML = `schema: 1
revision: 1
defaults: {image: d12, channel: stable, arch: native, boot: bios}
images:
  d12:
    channels: {stable: "1"}
    versions:
      "1": {variants: {amd64: {source_user: debian, file: custom-name.qcow2}}}
`

// emptyRepo returns a repository root holding repo.yaml and an empty
// images/; tests that make real qcow2 images skip without qemu-img.
func emptyRepo(t *testing.T, repoYAML []byte) string {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img is not installed: cannot create real qcow2 images")
	}
	root := filepath.Join(t.TempDir(), "repo")
	if err := os.MkdirAll(filepath.Join(root, "images"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "repo.yaml"), repoYAML, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func newRepo(t *testing.T) string {
	t.Helper()
	root := emptyRepo(t, []byte(repoYAML))
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", filepath.Join(root, "images", "custom-name.qcow2"), "8M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	return root
}

func TestBuildIsDeterministicAndUsesFileOverride(t *testing.T) {
	root := newRepo(t)
	_, a, _, _, err := Generate(context.Background(), root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, b, _, _, err := Generate(context.Background(), root, Options{SkipQemuImg: true})
	if err != nil || string(a) != string(b) {
		t.Fatalf("two generations differ or failed: %v", err)
	}
	c, err := catalog.DecodeCatalog(a, "catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	if f := c.Images["d12"].Versions["1"].Variants["amd64"].File; f != "images/custom-name.qcow2" {
		t.Fatalf("file %q", f)
	}
	before, _ := os.ReadFile(filepath.Join(root, "repo.yaml"))
	if _, err := Build(context.Background(), root, Options{}); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(root, "repo.yaml"))
	if string(before) != string(after) {
		t.Fatal("build changed repo.yaml")
	}
	if fi, _ := os.Stat(filepath.Join(root, "catalog.json")); fi.Mode().Perm() != 0o644 {
		t.Fatalf("catalog.json mode %04o", fi.Mode().Perm())
	}
}

func TestSymlinkedArtifactIsUnsafe(t *testing.T) {
	root := newRepo(t)
	img := filepath.Join(root, "images", "custom-name.qcow2")
	moved := filepath.Join(filepath.Dir(root), "elsewhere.qcow2")
	if err := os.Rename(img, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, img); err != nil {
		t.Fatal(err)
	}
	s, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Unsafe) != 1 || s.Unsafe[0].Reason != "symlink" || len(s.Missing) != 0 {
		t.Fatalf("scan: %+v", s)
	}
	if _, err := Build(context.Background(), root, Options{}); exitcode.As(err).Reason != "unsafe_artifact" {
		t.Fatalf("build over a symlink: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "catalog.json")); !os.IsNotExist(err) {
		t.Fatal("catalog.json written despite an unsafe artifact")
	}
}
