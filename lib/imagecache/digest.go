// Package imagecache keeps Barn's verified image cache under
// <BARN_HOME>/images: it pulls exact catalog artifacts (resumable, with a
// stall watchdog), verifies byte count, SHA-256 (in process) and the qcow2
// header before an atomic rename, re-verifies cached files before every
// use, imports local images and prunes unreferenced ones.
//
// Cache layout (owned by this package):
//
//	images/<family>/<file basename>                 verified catalog artifacts (0444)
//	images/<family>/.staging-<sha256>.partial       an interrupted download
//	images/<family>/<name>.corrupt-<timestamp>      a damaged file set aside
//	images/local/<basename>                         imported images (0444)
//	images/local-images.json                        the import registry
//	images/manifests/...                            catalog records (package catalog)
package imagecache

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"sync"
)

// bufSize is the read size used for hashing: large reads keep the SHA-256
// loop, not syscalls, the bottleneck.
const bufSize = 1 << 20

var bufPool = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

// Digest returns the lower-case hex SHA-256 of everything read from r and
// the number of bytes read.
func Digest(r io.Reader) (string, int64, error) {
	h := sha256.New()
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	n, err := io.CopyBuffer(h, onlyReader{r}, *bp)
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// onlyReader hides WriterTo/ReaderFrom so CopyBuffer uses our buffer.
type onlyReader struct{ io.Reader }
