package scripttest

import (
	"os"
	"strings"

	"barn.dev/lib/catalog"
)

// Environment of SubstituteOfficialFromEnv. They are read only by test
// binaries (a TestMain calls it); a shipped tool never looks at them.
const (
	EnvOfficialRoot    = "BARN_TEST_OFFICIAL_ROOT"    // primary root URL
	EnvOfficialMirror  = "BARN_TEST_OFFICIAL_MIRROR"  // mirror root URL
	EnvOfficialCatalog = "BARN_TEST_OFFICIAL_CATALOG" // file: the "embedded" catalog.json
	EnvOfficialKeys    = "BARN_TEST_OFFICIAL_KEYS"    // comma-separated minisign .pub files
)

// SubstituteOfficialFromEnv replaces the official repository compiled into
// Barn with the one the BARN_TEST_OFFICIAL_* variables describe, when
// BARN_TEST_OFFICIAL_ROOT is set; otherwise it does nothing. A testscript
// suite calls it first thing in TestMain, so the tools it runs as commands
// (re-executions of the test binary) download and verify "official"
// catalogs and images from a local server with test keys. It panics on an
// unreadable setting, and (through catalog.SubstituteOfficialForTest)
// outside a go test binary.
func SubstituteOfficialFromEnv() {
	root := os.Getenv(EnvOfficialRoot)
	if root == "" {
		return
	}
	o := &catalog.Official{Root: root, Mirror: os.Getenv(EnvOfficialMirror)}
	data, err := os.ReadFile(os.Getenv(EnvOfficialCatalog))
	if err != nil {
		panic("scripttest: " + EnvOfficialCatalog + ": " + err.Error())
	}
	o.Catalog = data
	for _, f := range strings.Split(os.Getenv(EnvOfficialKeys), ",") {
		text, err := os.ReadFile(f)
		if err != nil {
			panic("scripttest: " + EnvOfficialKeys + ": " + err.Error())
		}
		k, err := catalog.ParsePublicKey(text)
		if err != nil {
			panic("scripttest: " + f + ": " + err.Error())
		}
		o.Keys = append(o.Keys, k)
	}
	catalog.SubstituteOfficialForTest(o)
}
