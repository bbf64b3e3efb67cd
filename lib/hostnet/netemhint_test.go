package hostnet

import (
	"os"
	"path/filepath"
	"testing"
)

// A kernel that refused netem is helped by modprobe only when it loads
// modules at all; one built without module support (no /proc/modules,
// as this project's CI kernel) needs another kernel, and the hint says so.
func TestNetemHintFollowsModuleSupport(t *testing.T) {
	dir := t.TempDir()
	modules := filepath.Join(dir, "modules")
	if got := netemHint(modules); got != "boot a kernel built with CONFIG_NET_SCH_NETEM (this one has no loadable modules: "+modules+" is absent); barn-net fault isolate and partition work without it" {
		t.Errorf("without module support: %q", got)
	}
	if err := os.WriteFile(modules, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := netemHint(modules); got != "modprobe sch_netem" {
		t.Errorf("with module support: %q", got)
	}
}
