package qcow2

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// qemuImg runs the real qemu-img; tests that craft images with it skip only
// when it is not installed.
func qemuImg(t testing.TB, args ...string) {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img is not installed: cannot create real qcow2 images")
	}
	out, err := exec.Command("qemu-img", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("qemu-img %v: %v\n%s", args, err, out)
	}
}

func inspectFile(t *testing.T, path string) (Header, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return Inspect(f)
}

func TestInspectRealImages(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		args    []string
		version int
		size    int64
		cluster int64
	}{
		{"v3", []string{"-o", "compat=1.1"}, 3, 64 << 20, 65536},
		{"v2", []string{"-o", "compat=0.10"}, 2, 64 << 20, 65536},
		{"small-clusters", []string{"-o", "cluster_size=4096"}, 3, 10 << 20, 4096},
		{"zstd", []string{"-o", "compression_type=zstd"}, 3, 1 << 30, 65536},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".qcow2")
			qemuImg(t, append(append([]string{"create", "-q", "-f", "qcow2"}, tc.args...), p, itoa(tc.size))...)
			h, err := inspectFile(t, p)
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if h.Version != tc.version || h.VirtualSize != tc.size || h.ClusterSize != tc.cluster {
				t.Fatalf("got version %d size %d cluster %d, want %d %d %d", h.Version, h.VirtualSize, h.ClusterSize, tc.version, tc.size, tc.cluster)
			}
			// Cross-check with qemu-img info on the same file.
			info, err := Info(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			if info.VirtualSize != h.VirtualSize || info.Validate() != nil {
				t.Fatalf("qemu-img info disagrees: %+v (validate %v)", info, info.Validate())
			}
			if _, err := Check(context.Background(), p); err != nil {
				t.Fatalf("qemu-img check: %v", err)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestInspectRefusesRealFeatures(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base.qcow2")
	qemuImg(t, "create", "-q", "-f", "qcow2", base, "16M")
	for _, tc := range []struct {
		name string
		args []string
		want error
		info error // what ImgInfo.Validate must say about the same file
	}{
		{"backing", []string{"create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base}, ErrBackingFile, ErrBackingFile},
		// sha512: QEMU 7.2 times PBKDF2 with getrusage, whose tick
		// resolution can read a fast SHA-256 run as 0 ms and refuse with
		// "Unable to get accurate CPU usage" on an idle machine.
		{"encrypted", []string{"create", "-q", "--object", "secret,id=s0,data=pw", "-f", "qcow2", "-o", "encrypt.format=luks,encrypt.key-secret=s0,encrypt.hash-alg=sha512,encrypt.iter-time=10"}, ErrEncrypted, ErrEncrypted},
		{"datafile", []string{"create", "-q", "-f", "qcow2", "-o", "data_file=" + filepath.Join(dir, "data.raw")}, ErrDataFile, ErrDataFile},
		{"extl2", []string{"create", "-q", "-f", "qcow2", "-o", "extended_l2=on,cluster_size=128k"}, ErrExtendedL2, ErrExtendedL2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".qcow2")
			qemuImg(t, append(tc.args, p, "16M")...)
			_, err := inspectFile(t, p)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Inspect error = %v, want %v", err, tc.want)
			}
			out, _ := exec.Command("qemu-img", "info", "--output=json", "-U", p).Output()
			info, perr := ParseInfo(out)
			if perr != nil {
				t.Fatal(perr)
			}
			if verr := info.Validate(); !errors.Is(verr, tc.info) {
				t.Fatalf("qemu-img info validate = %v, want %v", verr, tc.info)
			}
		})
	}
}

// setIncompatible rewrites header bytes 72..79 of a real v3 image.
func setIncompatible(t *testing.T, src []byte, bits uint64) []byte {
	b := bytes.Clone(src)
	binary.BigEndian.PutUint64(b[72:], bits)
	return b
}

func TestInspectCraftedHeaders(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.qcow2")
	qemuImg(t, "create", "-q", "-f", "qcow2", p, "16M")
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	mod := func(f func(b []byte)) []byte { b := bytes.Clone(orig); f(b); return b }
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"unknown-incompatible-bit", setIncompatible(t, orig, 1<<9), ErrIncompatible},
		{"corrupt-bit", setIncompatible(t, orig, IncompatCorrupt), ErrCorrupt},
		{"dirty-bit", setIncompatible(t, orig, IncompatDirty), ErrDirty},
		{"data-file-bit", setIncompatible(t, orig, IncompatDataFile), ErrDataFile},
		{"crypt-method", mod(func(b []byte) { binary.BigEndian.PutUint32(b[32:], 1) }), ErrEncrypted},
		{"backing-offset", mod(func(b []byte) { binary.BigEndian.PutUint64(b[8:], 4096); binary.BigEndian.PutUint32(b[16:], 4) }), ErrBackingFile},
		{"version-4", mod(func(b []byte) { binary.BigEndian.PutUint32(b[4:], 4) }), ErrVersion},
		{"bad-magic", mod(func(b []byte) { b[3] = 0 }), ErrNotQcow2},
		{"zero-size", mod(func(b []byte) { binary.BigEndian.PutUint64(b[24:], 0) }), ErrMalformed},
		{"cluster-bits-30", mod(func(b []byte) { binary.BigEndian.PutUint32(b[20:], 30) }), ErrMalformed},
		{"truncated", orig[:60], ErrTruncated},
		{"header-length-odd", mod(func(b []byte) { binary.BigEndian.PutUint32(b[100:], 105) }), ErrMalformed},
		{"fde-extension", mod(func(b []byte) {
			binary.BigEndian.PutUint32(b[112:], extEncryption)
			binary.BigEndian.PutUint32(b[116:], 16)
		}), ErrEncrypted},
		{"data-file-extension", mod(func(b []byte) {
			binary.BigEndian.PutUint32(b[112:], extDataFile)
			binary.BigEndian.PutUint32(b[116:], 4)
		}), ErrDataFile},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Inspect(bytes.NewReader(tc.data))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Inspect error = %v, want %v", err, tc.want)
			}
		})
	}
	// The real qemu-img agrees that the crafted unknown-bit and corrupt-bit
	// images are not usable bases.
	for _, tc := range cases[:2] {
		q := filepath.Join(dir, tc.name+".qcow2")
		if err := os.WriteFile(q, tc.data, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("qemu-img", "info", "--output=json", "-U", q).CombinedOutput()
		if err == nil {
			info, _ := ParseInfo(out)
			if info.Validate() == nil {
				t.Fatalf("%s: qemu-img info accepted the crafted header: %s", tc.name, out)
			}
		}
	}
}

func FuzzInspect(f *testing.F) {
	dir := f.TempDir()
	p := filepath.Join(dir, "seed.qcow2")
	qemuImg(f, "create", "-q", "-f", "qcow2", p, "16M")
	seed, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed[:4096])
	f.Add(seed[:104])
	f.Add([]byte("QFI\xfb"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := Inspect(bytes.NewReader(data))
		if err != nil {
			return
		}
		// Accepted headers obey the invariants callers rely on.
		if h.VirtualSize <= 0 || h.VirtualSize > MaxVirtualSize || h.ClusterSize != 1<<h.ClusterBits ||
			(h.Version != 2 && h.Version != 3) || h.IncompatibleFeatures&(IncompatCorrupt|IncompatDataFile|IncompatDirty|IncompatExtendedL2) != 0 ||
			h.IncompatibleFeatures&^incompatKnown != 0 || !bytes.HasPrefix(data, Magic[:]) {
			t.Fatalf("accepted an invalid header: %+v", h)
		}
		if binary.BigEndian.Uint64(data[8:]) != 0 || binary.BigEndian.Uint32(data[32:]) != 0 {
			t.Fatalf("accepted a backing file or encryption: %+v", h)
		}
	})
}
