package inventory

import (
	"os"
	"testing"
)

// BenchmarkResolve20 resolves testdata/bench20.yml, a 20-node Pigsty
// inventory (scripts/bench-inventory.sh compares it with ansible-inventory).
func BenchmarkResolve20(b *testing.B) {
	data, err := os.ReadFile("testdata/bench20.yml")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		s, _, err := Resolve(data, "bench20.yml")
		if err != nil || len(s.Nodes) != 20 {
			b.Fatalf("resolve: %v", err)
		}
	}
}
