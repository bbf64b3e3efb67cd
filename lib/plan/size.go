package plan

import "barn.dev/lib/human"

// FormatSize renders a byte count exactly (human.ExactSize): 4 GiB, 4.5
// GiB, 1 TiB, 4100 MiB, or bytes ("1000 B") when no unit renders it
// exactly, so two different sizes never print alike. Drift lines and
// warnings compare sizes and use it; the plan's other text uses
// human.Size.
func FormatSize(bytes int64) string { return human.ExactSize(bytes) }
