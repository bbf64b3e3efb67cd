package disk

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/testexec"
)

func needQemuImg(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed: ", err)
	}
}

func makeBase(t *testing.T, dir, format string, size string) string {
	t.Helper()
	p := filepath.Join(dir, "base."+format)
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", format, p, size).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}
	return p
}

func class(err error) exitcode.Class { return exitcode.ClassOf(err) }

func TestOverlayEqualsMaxOfRequestedAndBase(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	base := makeBase(t, dir, "qcow2", "64M")
	dst := filepath.Join(dir, "root.qcow2")
	info, err := Tool{}.CreateOverlay(context.Background(), base, "qcow2", dst, 128<<20)
	if err != nil {
		t.Fatal(err)
	}
	if info.VirtualSize != 128<<20 || info.BackingFilename != base || info.BackingFilenameFormat != "qcow2" {
		t.Fatalf("overlay info = %+v", info)
	}
	fi, err := os.Stat(dst)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("overlay mode: %v %v", fi, err)
	}
	// read back independently
	back, err := Tool{}.Inspect(context.Background(), dst)
	if err != nil || back.FullBackingFilename != base {
		t.Fatalf("read back %+v %v", back, err)
	}
	// no temp file left behind
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("dir holds %d entries, want base+overlay", len(entries))
	}
	// equal to base size is fine
	if _, err := (Tool{}).CreateOverlay(context.Background(), base, "qcow2", filepath.Join(dir, "eq.qcow2"), 64<<20); err != nil {
		t.Fatal(err)
	}
}

func TestOverlayRefusesSmallerThanBaseAndExisting(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	base := makeBase(t, dir, "qcow2", "64M")
	dst := filepath.Join(dir, "root.qcow2")
	_, err := Tool{}.CreateOverlay(context.Background(), base, "qcow2", dst, 32<<20)
	if e := exitcode.As(err); e == nil || e.Reason != "root_disk_too_small" {
		t.Fatalf("err = %v, want root_disk_too_small", err)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Fatal("refused overlay left a file")
	}
	if err := os.WriteFile(dst, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Tool{}.CreateOverlay(context.Background(), base, "qcow2", dst, 64<<20)
	if class(err) != exitcode.Conflict {
		t.Fatalf("existing target: %v", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "keep" {
		t.Fatal("existing file was overwritten")
	}
}

func TestOverlayFormatIsExplicitNeverGuessed(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	raw := makeBase(t, dir, "raw", "16M")
	// claiming qcow2 for a raw base is refused
	_, err := Tool{}.CreateOverlay(context.Background(), raw, "qcow2", filepath.Join(dir, "a.qcow2"), 16<<20)
	if e := exitcode.As(err); e == nil || e.Reason != "base_format_mismatch" {
		t.Fatalf("err = %v", err)
	}
	// a raw base with the right explicit format works and is read back
	info, err := Tool{}.CreateOverlay(context.Background(), raw, "raw", filepath.Join(dir, "b.qcow2"), 32<<20)
	if err != nil || info.BackingFilenameFormat != "raw" {
		t.Fatalf("raw overlay: %+v %v", info, err)
	}
	// relative backing paths are refused
	if _, err := (Tool{}).CreateOverlay(context.Background(), "base.raw", "raw", filepath.Join(dir, "c.qcow2"), 32<<20); class(err) != exitcode.Usage {
		t.Fatalf("relative base: %v", err)
	}
}

func TestOverlayRefusesBaseWithBackingFile(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	base := makeBase(t, dir, "qcow2", "16M")
	mid := filepath.Join(dir, "mid.qcow2")
	if _, err := (Tool{}).CreateOverlay(context.Background(), base, "qcow2", mid, 16<<20); err != nil {
		t.Fatal(err)
	}
	_, err := Tool{}.CreateOverlay(context.Background(), mid, "qcow2", filepath.Join(dir, "top.qcow2"), 16<<20)
	if e := exitcode.As(err); e == nil || e.Reason != "base_has_backing_file" {
		t.Fatalf("err = %v", err)
	}
}

func TestGrowNeverShrinks(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "data.qcow2")
	if _, err := (Tool{}).CreateData(context.Background(), p, 16<<20); err != nil {
		t.Fatal(err)
	}
	info, err := Tool{}.Grow(context.Background(), p, 48<<20)
	if err != nil || info.VirtualSize != 48<<20 {
		t.Fatalf("grow: %+v %v", info, err)
	}
	_, err = Tool{}.Grow(context.Background(), p, 16<<20)
	if e := exitcode.As(err); e == nil || e.Reason != "disk_shrink_refused" {
		t.Fatalf("shrink: %v", err)
	}
	after, _ := Tool{}.Inspect(context.Background(), p)
	if after.VirtualSize != 48<<20 {
		t.Fatalf("size after refused shrink = %d", after.VirtualSize)
	}
}

func TestMissingQemuImgIsCapability(t *testing.T) {
	_, err := Tool{QemuImg: "/nonexistent/qemu-img"}.Inspect(context.Background(), "/x")
	if class(err) != exitcode.Capability {
		t.Fatalf("err = %v", err)
	}
}

// TestHeadersNamingADataFileAreRefused: qcow2's external data file is a
// second file a header can make QEMU open read-write. CheckBacking and
// CheckStandalone refuse any header naming one, and pass Barn's own
// overlays and data disks, read by the real qemu-img.
func TestHeadersNamingADataFileAreRefused(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	ctx := context.Background()
	base := makeBase(t, dir, "qcow2", "16M")
	qemuImg := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img %v: %v: %s", args, err, out)
		}
	}
	root := filepath.Join(dir, "root.qcow2")
	if _, err := (Tool{}).CreateOverlay(ctx, base, "qcow2", root, 32<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := (Tool{}).CheckBacking(ctx, root, base, "qcow2"); err != nil {
		t.Fatalf("Barn's own overlay: %v", err)
	}
	data := filepath.Join(dir, "data.qcow2")
	qemuImg("create", "-q", "-f", "qcow2", data, "16M")
	if _, err := (Tool{}).CheckStandalone(ctx, data); err != nil {
		t.Fatalf("a plain data disk: %v", err)
	}

	evilRoot := filepath.Join(dir, "evil-root.qcow2")
	qemuImg("create", "-q", "-f", "qcow2", "-b", base, "-F", "qcow2", "-o", "data_file="+filepath.Join(dir, "victim.raw"), evilRoot, "32M")
	if _, err := (Tool{}).CheckBacking(ctx, evilRoot, base, "qcow2"); class(err) != exitcode.Integrity || exitcode.As(err).Reason != "disk_header_mismatch" {
		t.Fatalf("overlay naming a data file: %v, want integrity disk_header_mismatch", err)
	}
	evilData := filepath.Join(dir, "evil-data.qcow2")
	qemuImg("create", "-q", "-f", "qcow2", "-o", "data_file="+filepath.Join(dir, "victim2.raw"), evilData, "16M")
	if _, err := (Tool{}).CheckStandalone(ctx, evilData); class(err) != exitcode.Integrity || exitcode.As(err).Reason != "disk_header_mismatch" {
		t.Fatalf("data disk naming a data file: %v, want integrity disk_header_mismatch", err)
	}
	if _, err := (Tool{}).CheckStandalone(ctx, root); exitcode.As(err) == nil || exitcode.As(err).Reason != "disk_header_mismatch" {
		t.Fatalf("data disk with a backing file: %v, want disk_header_mismatch", err)
	}
	if _, err := (Tool{}).CheckStandalone(ctx, base+".raw"); err == nil {
		t.Fatal("a missing disk passed")
	}
}

// TestScratchIsRemovedOnlyWhileItIsBarns: a disk is written to a
// temporary file Barn creates and records; when qemu-img fails, that file
// is removed by its identity, never by its name: a file something else
// put at the name is left alone.
func TestScratchIsRemovedOnlyWhileItIsBarns(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(t.TempDir(), "qemu-img")
	// create ... PATH SIZE: replace PATH with another file, then fail.
	script := "#!/bin/sh\nfor a; do p=$q; q=$a; done\nrm -f \"$p\" && echo theirs > \"$p\"\necho failed >&2\nexit 1\n"
	if err := testexec.WriteScript(fake, []byte(script)); err != nil {
		t.Fatal(err)
	}
	if _, err := (Tool{QemuImg: fake}).CreateData(context.Background(), filepath.Join(dir, "data.qcow2"), 1<<20); err == nil {
		t.Fatal("CreateData succeeded with a failing qemu-img")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("want the foreign file left at the temporary name, got %v", entries)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, entries[0].Name())); string(b) != "theirs\n" {
		t.Fatalf("%s holds %q", entries[0].Name(), b)
	}

	// A qemu-img that fails leaving Barn's own file: removed.
	clean := t.TempDir()
	if err := testexec.WriteScript(fake, []byte("#!/bin/sh\nexit 1\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := (Tool{QemuImg: fake}).CreateData(context.Background(), filepath.Join(clean, "data.qcow2"), 1<<20); err == nil {
		t.Fatal("CreateData succeeded with a failing qemu-img")
	}
	if entries, _ := os.ReadDir(clean); len(entries) != 0 {
		t.Fatalf("Barn's temporary file was left: %v", entries)
	}
}
