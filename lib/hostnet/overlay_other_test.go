//go:build !linux

package hostnet

import "testing"

// overlayEtc: the live tests run in a Linux network namespace only.
func overlayEtc(t *testing.T, dir string) {
	t.Fatal("live network tests need Linux (network and mount namespaces)")
}
