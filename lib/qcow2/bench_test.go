package qcow2

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkHeader compares in-process header inspection (open, read the
// header and extensions, close) with `qemu-img info --output=json` on the
// same real image (target: Inspect at least 10× faster).
func BenchmarkHeader(b *testing.B) {
	p := filepath.Join(b.TempDir(), "bench.qcow2")
	qemuImg(b, "create", "-q", "-f", "qcow2", p, "20G")
	b.Run("inspect", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			h, err := Inspect(f)
			f.Close()
			if err != nil || h.VirtualSize != 20<<30 {
				b.Fatalf("inspect: %+v %v", h, err)
			}
		}
	})
	b.Run("qemu-img-info", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			info, err := Info(context.Background(), p)
			if err != nil || info.VirtualSize != 20<<30 {
				b.Fatalf("qemu-img info: %+v %v", info, err)
			}
		}
	})
}
