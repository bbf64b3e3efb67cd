package catalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"barn.dev/lib/exitcode"
)

// CatalogHTTPTimeout bounds one catalog or signature request (30 s).
const CatalogHTTPTimeout = 30 * time.Second

// Fetch reads a catalog and its detached signature from an exact location:
// a file path or an http(s) URL of catalog.json; the signature is at
// location + ".minisig" and is nil when absent. Oversized documents are
// integrity errors; unreachable sources are runtime errors.
func Fetch(ctx context.Context, location string) (data, sig []byte, err error) {
	data, found, err := fetchOne(ctx, location, MaxCatalogBytes)
	if err != nil {
		return nil, nil, err
	}
	if !found {
		return nil, nil, exitcode.New(exitcode.Usage, "%s does not exist", location).WithReason("no_catalog")
	}
	sig, found, err = fetchOne(ctx, location+".minisig", MaxSignatureBytes)
	if err != nil {
		return nil, nil, err
	}
	if !found {
		sig = nil
	}
	return data, sig, nil
}

func fetchOne(ctx context.Context, loc string, limit int64) ([]byte, bool, error) {
	var r io.ReadCloser
	if strings.HasPrefix(loc, "http://") || strings.HasPrefix(loc, "https://") {
		ctx, cancel := context.WithTimeout(ctx, CatalogHTTPTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc, nil)
		if err != nil {
			return nil, false, exitcode.Wrap(exitcode.Usage, err, "fetching %s", loc)
		}
		resp, err := NewHTTPClient(CatalogHTTPTimeout).Do(req)
		if err != nil {
			reason := "fetch_failed"
			if errors.Is(err, ErrRedirectRefused) {
				reason = "redirect_refused"
			}
			return nil, false, exitcode.Wrap(exitcode.Runtime, err, "fetching %s", loc).WithReason(reason)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			return nil, false, nil
		}
		if resp.StatusCode != http.StatusOK {
			return nil, false, exitcode.New(exitcode.Runtime, "fetching %s: HTTP %s", loc, resp.Status).WithReason("fetch_failed")
		}
		r = resp.Body
		return readCapped(r, limit, loc)
	}
	fi, err := os.Lstat(loc)
	if os.IsNotExist(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, exitcode.Wrap(exitcode.Runtime, err, "reading %s", loc)
	}
	if !fi.Mode().IsRegular() {
		return nil, false, exitcode.New(exitcode.Integrity, "%s is not a regular file", loc).WithReason("unsafe_catalog")
	}
	f, err := os.Open(loc)
	if err != nil {
		return nil, false, exitcode.Wrap(exitcode.Runtime, err, "reading %s", loc)
	}
	defer f.Close()
	return readCapped(f, limit, loc)
}

func readCapped(r io.Reader, limit int64, loc string) ([]byte, bool, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, false, exitcode.Wrap(exitcode.Runtime, err, "reading %s", loc).WithReason("fetch_failed")
	}
	if int64(len(b)) > limit {
		reason := "catalog_too_large"
		if strings.HasSuffix(loc, ".minisig") {
			reason = "signature_too_large"
		}
		return nil, false, exitcode.New(exitcode.Integrity, "%s is larger than the %d byte limit", loc, limit).WithReason(reason)
	}
	return b, true, nil
}

// CatalogLocation is the exact catalog.json of a repository.
func (s Source) CatalogLocation() string { return s.Join(CatalogFile) }

// String names the source for messages.
func (s Source) String() string { return fmt.Sprintf("%s repository %s", s.Kind, s.Root) }
