package catalog

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
)

func TestFetchLimitsAndMissingSignature(t *testing.T) {
	big := strings.Repeat(" ", MaxCatalogBytes+1)
	sigBig := strings.Repeat("x", MaxSignatureBytes+1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big/catalog.json":
			_, _ = w.Write([]byte(big))
		case "/bigsig/catalog.json", "/nosig/catalog.json":
			_, _ = w.Write([]byte("{}"))
		case "/bigsig/catalog.json.minisig":
			_, _ = w.Write([]byte(sigBig))
		case "/broken/catalog.json":
			http.Error(w, "boom", http.StatusInternalServerError)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	if _, _, err := Fetch(ctx, srv.URL+"/big/catalog.json"); exitcode.As(err).Reason != "catalog_too_large" || exitcode.ClassOf(err) != exitcode.Integrity {
		t.Fatalf("oversized catalog: %v", err)
	}
	if _, _, err := Fetch(ctx, srv.URL+"/bigsig/catalog.json"); exitcode.As(err).Reason != "signature_too_large" {
		t.Fatalf("oversized signature: %v", err)
	}
	data, sig, err := Fetch(ctx, srv.URL+"/nosig/catalog.json")
	if err != nil || string(data) != "{}" || sig != nil {
		t.Fatalf("unsigned fetch: %q %q %v", data, sig, err)
	}
	if _, _, err := Fetch(ctx, srv.URL+"/none/catalog.json"); exitcode.As(err).Reason != "no_catalog" {
		t.Fatalf("missing catalog: %v", err)
	}
	if _, _, err := Fetch(ctx, srv.URL+"/broken/catalog.json"); exitcode.ClassOf(err) != exitcode.Runtime {
		t.Fatalf("HTTP 500: %v", err)
	}
}

func TestRedirectPolicy(t *testing.T) {
	c := NewHTTPClient(CatalogHTTPTimeout)
	req := func(u string) *http.Request { p, _ := url.Parse(u); return &http.Request{URL: p} }
	refused := func(err error) bool { return errors.Is(err, ErrRedirectRefused) }
	if err := c.CheckRedirect(req("http://mirror.test/c.json"), []*http.Request{req("https://repo.test/c.json")}); !refused(err) {
		t.Fatalf("https → http redirect: %v", err)
	}
	if err := c.CheckRedirect(req("https://u:p@mirror.test/c.json"), []*http.Request{req("https://repo.test/c.json")}); !refused(err) {
		t.Fatalf("redirect to credentials: %v", err)
	}
	// via holds the original request and the redirects followed so far.
	six := []*http.Request{req("https://a"), req("https://b"), req("https://c"), req("https://d"), req("https://e"), req("https://f")}
	if err := c.CheckRedirect(req("https://g"), six[:5]); err != nil {
		t.Fatalf("the fifth redirect was refused: %v", err)
	}
	if err := c.CheckRedirect(req("https://g"), six); !refused(err) {
		t.Fatalf("a sixth redirect: %v", err)
	}
	if err := c.CheckRedirect(req("https://mirror.test/c.json"), six[:1]); err != nil {
		t.Fatalf("https → https redirect refused: %v", err)
	}
}
