package catalog

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"aead.dev/minisign"
)

// The official repository compiled into Barn (see official/PROVENANCE.md).
const (
	OfficialRoot = "https://repo.pigsty.io/barn" // the default repository
	MirrorRoot   = "https://repo.pigsty.cc/barn" // selected with --mirror
	// OfficialSlot is the registry slot both official roots share: they
	// serve the same signed catalog, so they share one high-water mark.
	OfficialSlot = "default"
	// EmbeddedActive is Record.Active while the official slot uses the
	// catalog compiled into the binary.
	EmbeddedActive = "embedded"
)

var (
	//go:embed official/catalog.json
	embeddedCatalog []byte
	//go:embed official/barn-catalog-active.pub
	activeKey []byte
	//go:embed official/barn-catalog-standby.pub
	standbyKey []byte
)

// Official is the compiled default repository: its two roots, the catalog
// embedded in the binary (the baseline every installation starts from) and
// the only keys allowed to sign its catalogs.
type Official struct {
	Root    string               // primary root, e.g. OfficialRoot
	Mirror  string               // mirror root, e.g. MirrorRoot
	Catalog []byte               // embedded catalog.json bytes
	Keys    []minisign.PublicKey // catalog signing keys; either verifies
}

// Embedded decodes the embedded catalog and returns it with the hex
// SHA-256 of its bytes. An undecodable embedded catalog is an integrity
// error (a broken build, caught by the package's tests).
func (o *Official) Embedded() (*Catalog, string, error) {
	c, err := DecodeCatalog(o.Catalog, "the catalog embedded in this binary")
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(o.Catalog)
	return c, hex.EncodeToString(sum[:]), nil
}

// Sources returns the two official repositories, primary first.
func (o *Official) Sources() (primary, mirror Source) {
	return officialSource(o.Root), officialSource(o.Mirror)
}

func officialSource(root string) Source {
	return Source{Kind: "https", Root: root, Key: OfficialSlot, Official: true}
}

// official is the repository in use; nil until first asked for, when the
// compiled one is built (parsing the keys at first use keeps them out of
// every tool's start-up).
var (
	official     atomic.Pointer[Official]
	officialOnce sync.Once
)

func compiledOfficial() {
	var keys []minisign.PublicKey
	for _, text := range [][]byte{activeKey, standbyKey} {
		k, err := ParsePublicKey(text)
		if err != nil {
			panic(fmt.Sprintf("catalog: embedded official key: %v", err))
		}
		keys = append(keys, k)
	}
	official.CompareAndSwap(nil, &Official{Root: OfficialRoot, Mirror: MirrorRoot, Catalog: embeddedCatalog, Keys: keys})
}

// OfficialRepository returns the compiled default repository (or a test's
// substitute).
func OfficialRepository() *Official {
	officialOnce.Do(compiledOfficial)
	return official.Load()
}

// SubstituteOfficialForTest replaces the compiled default repository (its
// roots, embedded catalog and keys) until restore is called, so tests can
// prove the official download and trust path against a local server with
// their own keys. It panics outside a binary built by `go test`
// (testing.Testing): no flag, environment variable or file can make a
// shipped binary trust other keys for the official repository.
func SubstituteOfficialForTest(o *Official) (restore func()) {
	if !testing.Testing() {
		panic("catalog: SubstituteOfficialForTest called outside a test binary")
	}
	officialOnce.Do(compiledOfficial)
	prev := official.Swap(o)
	return func() { official.Store(prev) }
}
