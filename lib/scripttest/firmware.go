package scripttest

import (
	"strings"

	"barn.dev/lib/qemu"
)

// EnvFirmware is read only by test binaries (barn-node's cli.FirmwareHook
// set to Firmware): "CODE:VARS" makes that pair the only UEFI firmware
// probed, "none" makes none exist; unset leaves the distro locations.
const EnvFirmware = "BARN_TEST_FIRMWARE"

// Firmware returns the UEFI firmware pairs BARN_TEST_FIRMWARE names: nil
// (the distro locations) when unset, an empty list for "none".
func Firmware(getenv func(string) string) []qemu.Firmware {
	v := getenv(EnvFirmware)
	switch {
	case v == "":
		return nil
	case v == "none":
		return []qemu.Firmware{}
	}
	code, vars, _ := strings.Cut(v, ":")
	return []qemu.Firmware{{Code: code, Vars: vars}}
}
