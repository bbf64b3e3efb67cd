package cidata

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"encoding/binary"
	"unicode/utf16"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
	kiso "github.com/kdomanski/iso9660"
)

func writeFixtureISO(t *testing.T) (string, Files) {
	t.Helper()
	f, err := Render(fixtureInput(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "seed.iso")
	if err := WriteISO(path, f); err != nil {
		t.Fatal(err)
	}
	return path, f
}

// TestISOVolumeDescriptors checks the raw bytes: the primary volume
// descriptor at sector 16 carries volume id "cidata" at offset 0x8028
// (field report 23), a Joliet supplementary descriptor follows, and the
// root directory's system use area has Rock Ridge entries.
func TestISOVolumeDescriptors(t *testing.T) {
	path, _ := writeFixtureISO(t)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b)%2048 != 0 || len(b) < 20*2048 {
		t.Fatalf("size %d is not a whole number of 2048-byte sectors", len(b))
	}
	if b[0x8000] != 1 || string(b[0x8001:0x8006]) != "CD001" {
		t.Fatalf("no primary volume descriptor at sector 16: % x", b[0x8000:0x8006])
	}
	if got := string(b[0x8028 : 0x8028+32]); got != "cidata"+strings.Repeat(" ", 26) {
		t.Fatalf("volume id = %q, want cidata padded with spaces", got)
	}
	joliet := false
	for s := 17; s < 32; s++ {
		vd := b[s*2048 : (s+1)*2048]
		if string(vd[1:6]) != "CD001" {
			t.Fatalf("sector %d is not a volume descriptor", s)
		}
		if vd[0] == 2 && vd[88] == '%' && vd[89] == '/' && bytes.ContainsAny(vd[90:91], "@CE") {
			joliet = true
		}
		if vd[0] == 255 {
			break
		}
	}
	if !joliet {
		t.Error("no Joliet supplementary volume descriptor (escape %/@, %/C or %/E)")
	}
	if !bytes.Contains(b, []byte("RRIP_1991A")) && !bytes.Contains(b, []byte("IEEE_P1282")) && !bytes.Contains(b, []byte("NMmeta-data")) {
		// The ER entry names the Rock Ridge version; NM entries carry names.
		if !bytes.Contains(b, []byte("meta-data")) {
			t.Error("no Rock Ridge entries found")
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("seed mode = %v, want 0600", fi.Mode().Perm())
	}
}

// TestISOFilesRoundTrip reads the three files back out of the image by
// their exact (Rock Ridge) names.
func TestISOFilesRoundTrip(t *testing.T) {
	path, want := writeFixtureISO(t)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	fsys, err := iso9660.Read(file.New(f, true), fi.Size(), 0, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(fsys.Label()); got != "cidata" {
		t.Errorf("label = %q", got)
	}
	entries, err := fsys.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "meta-data,network-config,user-data" {
		t.Errorf("root directory = %v", names)
	}
	for name, data := range map[string][]byte{MetaDataName: want.MetaData, UserDataName: want.UserData, NetworkConfigName: want.NetworkConfig} {
		got, err := fsys.ReadFile(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !bytes.Equal(got, data) {
			t.Errorf("%s: content differs (%d vs %d bytes)", name, len(got), len(data))
		}
	}
}

// TestISOLabelSeenByBlkid asks util-linux blkid (what cloud-init's
// ds-identify uses) for the label and type.
func TestISOLabelSeenByBlkid(t *testing.T) {
	if _, err := exec.LookPath("blkid"); err != nil {
		t.Skip("blkid (util-linux) not installed")
	}
	path, _ := writeFixtureISO(t)
	out, err := exec.Command("blkid", "-p", "-o", "export", path).CombinedOutput()
	if err != nil {
		t.Fatalf("blkid: %v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "LABEL=cidata\n") || !strings.Contains(s, "TYPE=iso9660\n") {
		t.Fatalf("blkid sees:\n%s", s)
	}
}

// TestISOReadByAnotherImplementation reads the seed in user space with
// github.com/kdomanski/iso9660, a reader that shares no code with the
// go-diskfs writer: the primary volume's label and exactly the three seed
// files with their exact contents. (It replaces a loop mount through the
// kernel's isofs driver, which needs root and the isofs module and so
// never ran on machines without them; the real-guest suites still read
// the seed through a guest kernel.) This reader only honours Rock Ridge
// when the ER entry says RRIP_1991A; go-diskfs writes RRIP 1.12's
// IEEE_P1282, which the Linux kernel accepts, so the exact Rock Ridge and
// Joliet names are checked by TestISOIndependentReader and
// TestISOFilesRoundTrip, and here the ISO 9660 level-1 names.
func TestISOReadByAnotherImplementation(t *testing.T) {
	path, want := writeFixtureISO(t)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := kiso.OpenImage(f)
	if err != nil {
		t.Fatal(err)
	}
	if label, err := img.Label(); err != nil || label != VolumeID {
		t.Errorf("label = %q, %v; want %q", label, err, VolumeID)
	}
	root, err := img.RootDir()
	if err != nil {
		t.Fatal(err)
	}
	children, err := root.GetChildren()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for _, c := range children {
		if c.IsDir() {
			t.Errorf("unexpected directory %q in the seed", c.Name())
			continue
		}
		data, err := io.ReadAll(c.Reader())
		if err != nil {
			t.Fatalf("%s: %v", c.Name(), err)
		}
		got[c.Name()] = data
	}
	for name, data := range map[string][]byte{"META_DAT": want.MetaData, "USER_DAT": want.UserData, "NETWORK_": want.NetworkConfig} {
		if !bytes.Equal(got[name], data) {
			t.Errorf("%s: missing or different (%d bytes read, %d written)", name, len(got[name]), len(data))
		}
	}
	if len(got) != 3 {
		t.Errorf("root directory holds %d files, want 3: %v", len(got), keys(got))
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestWriteISORefusesMissingFile(t *testing.T) {
	f, _ := Render(fixtureInput(t, 1))
	f.NetworkConfig = nil
	path := filepath.Join(t.TempDir(), "seed.iso")
	if err := WriteISO(path, f); err == nil {
		t.Fatal("WriteISO accepted a seed without network-config")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Error("a failed WriteISO left a file behind")
	}
}

// isoDir is a minimal, independent ECMA-119 reader for the test: it lists
// the root directory of the descriptor at sector vd and returns name →
// content, taking names from Rock Ridge NM entries (rr) or UCS-2 (joliet).
func isoDir(t *testing.T, img []byte, vd int, joliet bool) map[string][]byte {
	t.Helper()
	root := img[vd*2048+156 : vd*2048+156+34]
	lba := int(binary.LittleEndian.Uint32(root[2:6]))
	size := int(binary.LittleEndian.Uint32(root[10:14]))
	dir := img[lba*2048 : lba*2048+size]
	out := map[string][]byte{}
	for off := 0; off < len(dir); {
		n := int(dir[off])
		if n == 0 { // records never cross a sector boundary
			off = (off/2048 + 1) * 2048
			continue
		}
		rec := dir[off : off+n]
		off += n
		nl := int(rec[32])
		raw := rec[33 : 33+nl]
		if nl == 1 && (raw[0] == 0 || raw[0] == 1) {
			continue
		}
		name := string(raw)
		if joliet {
			u := make([]uint16, nl/2)
			for i := range u {
				u[i] = binary.BigEndian.Uint16(raw[2*i:])
			}
			name = string(utf16.Decode(u))
		} else {
			su := rec[33+nl+(1-nl%2):]
			name = ""
			for len(su) >= 4 && su[2] >= 4 && int(su[2]) <= len(su) {
				if string(su[:2]) == "NM" {
					name += string(su[5:su[2]])
				}
				su = su[su[2]:]
			}
			if name == "" {
				t.Fatalf("no Rock Ridge NM entry for %q", raw)
			}
		}
		flba := int(binary.LittleEndian.Uint32(rec[2:6]))
		flen := int(binary.LittleEndian.Uint32(rec[10:14]))
		out[name] = img[flba*2048 : flba*2048+flen]
	}
	return out
}

// TestISOIndependentReader reads the three files back out of the bytes
// with a reader that shares no code with the writer: once through the
// primary tree's Rock Ridge names, once through the Joliet tree.
func TestISOIndependentReader(t *testing.T) {
	path, want := writeFixtureISO(t)
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	jvd := 0
	for s := 17; s < 32 && img[s*2048] != 255; s++ {
		if img[s*2048] == 2 {
			jvd = s
		}
	}
	if jvd == 0 {
		t.Fatal("no Joliet descriptor")
	}
	for _, tree := range []struct {
		vd     int
		joliet bool
	}{{16, false}, {jvd, true}} {
		got := isoDir(t, img, tree.vd, tree.joliet)
		if len(got) != 3 {
			t.Errorf("joliet=%v: root has %d entries: %v", tree.joliet, len(got), got)
		}
		for name, data := range map[string][]byte{MetaDataName: want.MetaData, UserDataName: want.UserData, NetworkConfigName: want.NetworkConfig} {
			if !bytes.Equal(got[name], data) {
				t.Errorf("joliet=%v: %s differs or is missing", tree.joliet, name)
			}
		}
	}
}
