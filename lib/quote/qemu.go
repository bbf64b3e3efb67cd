package quote

import "strings"

// QEMUOpt returns s as a value inside a QEMU key=value option string
// (-qmp unix:PATH,..., -chardev file,path=PATH, -drive file=PATH,
// -netdev bridge,helper=PATH): QemuOpts and keyval end a value at a single
// comma and read ",," as one literal comma (QEMU util/qemu-option.c
// get_opt_value; qemu(1) on -drive file=: "If the filename contains comma,
// you must double it"). Every other byte, newlines and non-ASCII included,
// is literal, so nothing is refused.
func QEMUOpt(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// SplitQEMUOpts splits a QEMU key=value option string at single commas,
// reading ",," as one literal comma: the inverse of joining QEMUOpt-escaped
// values with ",".
func SplitQEMUOpts(s string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != ',' {
			cur.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == ',' {
			cur.WriteByte(',')
			i++
			continue
		}
		out = append(out, cur.String())
		cur.Reset()
	}
	return append(out, cur.String())
}
