package cli

import (
	"os/exec"
	"testing"
)

// The root probe is real sh, findmnt, lsblk and sysfs: run here, on this
// machine's own root, its output is what parseRootProbe reads, with the
// root's source, type and size findmnt gives (and, when lsblk knows the
// source, a device geometry).
func TestRootProbeScriptRunsOnRealTools(t *testing.T) {
	for _, tool := range []string{"findmnt", "lsblk"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the root probe test needs %s: %v", tool, err)
		}
	}
	out, err := exec.Command("sh", "-c", rootProbeScript).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	fs, err := parseRootProbe(string(out))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want, err := exec.Command("findmnt", "-bnr", "-o", "SOURCE", "/").Output()
	if err != nil || fs.Source+"\n" != string(want) || fs.SizeBytes <= 0 {
		t.Fatalf("probe %+v, findmnt %q (%v)\n%s", fs, want, err, out)
	}
	if fs.DevType != "" && (fs.Disk == "" || fs.PartBytes <= 0 || fs.PartStart+fs.PartBytes <= 0) {
		t.Fatalf("device without geometry: %+v\n%s", fs, out)
	}
	t.Logf("%+v", fs)
}

func TestParseRootProbe(t *testing.T) {
	fs, err := parseRootProbe("source=/dev/vda1 fstype=ext4 fs_bytes=8000\ntype=part disk=vda serial=barn-root start=1048576 bytes=9000 last=yes\n")
	if err != nil || fs.Source != "/dev/vda1" || fs.FSType != "ext4" || fs.SizeBytes != 8000 || fs.DevType != "part" || fs.Disk != "vda" ||
		fs.DiskSerial != "barn-root" || fs.PartStart != 1048576 || fs.PartBytes != 9000 || !fs.Last {
		t.Fatalf("%+v, %v", fs, err)
	}
	// lsblk did not know the source: no device, and no layout to grow
	if fs, err := parseRootProbe("source=overlay fstype=overlay fs_bytes=1\n"); err != nil || fs.DevType != "" || fs.Last {
		t.Fatalf("%+v, %v", fs, err)
	}
	// an empty serial and a partition followed by another
	if fs, err := parseRootProbe("source=/dev/sda2 fstype=xfs fs_bytes=1\ntype=part disk=sda serial= start=0 bytes=2 last=no\n"); err != nil || fs.DiskSerial != "" || fs.Last {
		t.Fatalf("%+v, %v", fs, err)
	}
	for _, bad := range []string{"", "source= fstype= fs_bytes=\n", "source=/dev/vda1 fstype=ext4 fs_bytes=x\n", "surprise\n",
		"source=/dev/vda1 fstype=ext4 fs_bytes=1\ntype=part disk=vda serial= start= bytes=\n"} {
		if fs, err := parseRootProbe(bad); err == nil {
			t.Errorf("%q was accepted: %+v", bad, fs)
		}
	}
}
