package imagecache

import (
	"crypto/rand"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// benchBytes is the size of the hashed file: BARN_BENCH_BYTES, default 1 GiB.
func benchBytes() int64 {
	if v, err := strconv.ParseInt(os.Getenv("BARN_BENCH_BYTES"), 10, 64); err == nil && v > 0 {
		return v
	}
	return 1 << 30
}

var (
	benchOnce sync.Once
	benchPath string
	benchErr  error
)

// TestMain removes the benchmarks' shared random file (up to 1 GiB) after
// the package's tests and benchmarks have run.
func TestMain(m *testing.M) {
	code := m.Run()
	if benchPath != "" {
		os.RemoveAll(filepath.Dir(benchPath))
	}
	os.Exit(code)
}

// benchFile writes one file of random bytes shared by the SHA-256
// benchmarks (random so that no layer can shortcut zeros).
func benchFile(b *testing.B) string {
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "barn-bench-")
		if err != nil {
			benchErr = err
			return
		}
		benchPath = filepath.Join(dir, "image.bin")
		f, err := os.Create(benchPath)
		if err != nil {
			benchErr = err
			return
		}
		defer f.Close()
		_, benchErr = io.CopyN(f, rand.Reader, benchBytes())
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchPath
}

// BenchmarkSHA256 compares Barn's in-process verification hash with
// coreutils sha256sum over the same file in the same run; MB/s of the two
// sub-benchmarks give the ratio (target: go ≥ 0.9 × sha256sum).
// scripts/bench-images.sh prints medians and the ratio.
func BenchmarkSHA256(b *testing.B) {
	p := benchFile(b)
	size := benchBytes()
	var want string
	b.Run("go", func(b *testing.B) {
		b.SetBytes(size)
		for i := 0; i < b.N; i++ {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			sum, n, err := Digest(f)
			f.Close()
			if err != nil || n != size {
				b.Fatalf("digest: %v (%d bytes)", err, n)
			}
			want = sum
		}
	})
	b.Run("sha256sum", func(b *testing.B) {
		if _, err := exec.LookPath("sha256sum"); err != nil {
			b.Skip("sha256sum is not installed")
		}
		b.SetBytes(size)
		for i := 0; i < b.N; i++ {
			out, err := exec.Command("sha256sum", p).Output()
			if err != nil {
				b.Fatal(err)
			}
			if want != "" && !strings.HasPrefix(string(out), want) {
				b.Fatalf("sha256sum disagrees: %s vs %s", out[:64], want)
			}
		}
	})
}
