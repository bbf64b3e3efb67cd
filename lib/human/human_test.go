package human

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

const gib = int64(1) << 30

func TestExactSize(t *testing.T) {
	for in, want := range map[int64]string{
		4 * gib: "4 GiB", 4608 << 20: "4.5 GiB", 1024 * gib: "1 TiB", 1280 * gib: "1.25 TiB",
		4100 << 20: "4100 MiB", 1536: "1.5 KiB", 1000: "1000 B", 0: "0 B",
		64*gib + 1: "68719476737 B", -(2 * gib): "-2 GiB",
	} {
		if got := ExactSize(in); got != want {
			t.Errorf("ExactSize(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestSize(t *testing.T) {
	for in, want := range map[int64]string{
		625612288:  "596.6 MiB", // the plan used to print 610949.5 KiB
		4 * gib:    "4 GiB",
		4608 << 20: "4.5 GiB",
		1280 * gib: "1.25 TiB",
		gib + 1:    "1 GiB", // rounded; one decimal would be 1.0
		2*gib - 1:  "2 GiB",
		1500 << 20: "1.5 GiB", // 1.4648…: one decimal
		1000:       "1000 B",
		1025:       "1 KiB",
		1126:       "1.1 KiB",
		0:          "0 B",
		-1536:      "-1.5 KiB",
	} {
		if got := Size(in); got != want {
			t.Errorf("Size(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestDuration(t *testing.T) {
	for in, want := range map[time.Duration]string{
		0: "0s", 1400 * time.Millisecond: "1s", 45 * time.Second: "45s", 185 * time.Second: "3m 05s",
		time.Hour + 2*time.Minute + 59*time.Second: "1h 02m", 51 * time.Hour: "2d 03h", -time.Second: "0s",
	} {
		if got := Duration(in); got != want {
			t.Errorf("Duration(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestTableAligns(t *testing.T) {
	var b bytes.Buffer
	tw := Table(&b)
	fmt.Fprintln(tw, "pg-meta-1\trunning\t10.10.10.10")
	fmt.Fprintln(tw, "n1\tstopped\t10.10.10.2")
	_ = tw.Flush()
	want := "pg-meta-1  running  10.10.10.10\nn1         stopped  10.10.10.2\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"pg-test-1", "pg-test-1", 0}, {"pg-test-1", "pg-test-2", 1},
		{"vm_cpus", "vm_cpu", 1}, {"vm_cpu", "cpu_vm", 6}, {"", "abc", 3},
		{"größe", "grosse", 3}, {"ö", "o", 1}, // runes, not bytes
	} {
		if got := EditDistance(c.a, c.b); got != c.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := EditDistance(c.b, c.a); got != c.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d (symmetric)", c.b, c.a, got, c.want)
		}
	}
}
