package plan

import "testing"

func TestFormatSize(t *testing.T) {
	for in, want := range map[int64]string{
		4 * gib:          "4 GiB",
		8 * gib:          "8 GiB",
		4608 << 20:       "4.5 GiB",
		128 * gib:        "128 GiB",
		1023 * gib:       "1023 GiB",
		1024 * gib:       "1 TiB",
		1536 * gib:       "1.5 TiB",
		1280 * gib:       "1.25 TiB",
		4100 << 20:       "4100 MiB",
		512 << 20:        "512 MiB",
		1536:             "1.5 KiB",
		1000:             "1000 B",
		0:                "0 B",
		(64 * gib) + 1:   "68719476737 B",
		-(2 * gib):       "-2 GiB",
		3*gib + 1<<29:    "3.5 GiB",
		100 * 1024 * gib: "100 TiB",
	} {
		if got := FormatSize(in); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", in, got, want)
		}
	}
}
