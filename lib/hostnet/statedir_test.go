package hostnet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readDirNames(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

// The state directory Barn creates for its manifests (with its missing
// parents) is recorded and removed with the last manifest; the network's
// and the hosts' manifests share it, in either order.
func TestStateDirGoesWithTheLastManifest(t *testing.T) {
	top := t.TempDir()
	h := &Host{EtcDir: filepath.Join(top, "etc"), StateDir: filepath.Join(top, "var/lib/barn"), RunDir: filepath.Join(top, "run")}
	must(t, os.MkdirAll(h.EtcDir, 0o755))
	must(t, os.WriteFile(h.HostsPath(), []byte("127.0.0.1\tlocalhost\n"), 0o644))
	if _, err := h.InstallHosts(entries); err != nil {
		t.Fatal(err)
	}
	rec, _ := os.ReadFile(h.StateDirRecordPath())
	if !strings.Contains(string(rec), `"created": [
    "`+filepath.Join(top, "var")+`",
    "`+filepath.Join(top, "var/lib")+`",
    "`+h.StateDir+`"
  ]`) {
		t.Fatalf("record:\n%s", rec)
	}
	// the network's manifest joins it
	must(t, h.writeManifest(&Manifest{Schema: ManifestSchema, Status: StatusInstalled, Steps: []Step{{ID: "write-manifest", Kind: KindManifest}}, Applied: 1}))
	res, err := h.UninstallHosts(true)
	if err != nil {
		t.Fatal(err)
	}
	if got := readDirNames(t, h.StateDir); got != "created.json network.json" {
		t.Fatalf("after the hosts uninstall: %s (notes %v)", got, res.Notes)
	}
	must(t, h.undoStep(context.Background(), &Manifest{}, Step{Kind: KindManifest}, false, nil))
	if got := readDirNames(t, top); got != "etc" {
		t.Fatalf("after the last manifest went, %s holds %s", top, got)
	}
}

// A state directory that existed before Barn, or that holds something
// else when the last manifest goes, stays.
func TestStateDirNotBarnsStays(t *testing.T) {
	top := t.TempDir()
	h := &Host{EtcDir: filepath.Join(top, "etc"), StateDir: filepath.Join(top, "state"), RunDir: filepath.Join(top, "run")}
	must(t, os.MkdirAll(h.EtcDir, 0o755))
	must(t, os.MkdirAll(h.StateDir, 0o755))
	if _, err := h.InstallHosts(entries); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(h.StateDirRecordPath()); err == nil {
		t.Fatal("an existing state directory was recorded as Barn's")
	}
	res, err := h.UninstallHosts(true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(h.StateDir); err != nil {
		t.Fatalf("the existing state directory went: %v (notes %v)", err, res.Notes)
	}

	h.StateDir = filepath.Join(top, "fresh")
	if _, err := h.InstallHosts(entries); err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(h.StateDir, "notes.txt"), []byte("mine"), 0o644))
	if _, err := h.UninstallHosts(true); err != nil {
		t.Fatal(err)
	}
	if got := readDirNames(t, h.StateDir); got != "created.json notes.txt" {
		t.Fatalf("%s holds %s", h.StateDir, got)
	}
}
