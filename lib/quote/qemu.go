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
