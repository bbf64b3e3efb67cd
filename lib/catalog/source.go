package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"barn.dev/lib/exitcode"
)

// Source is a repository: a local directory or an http(s) URL (its root,
// holding catalog.json and images/).
type Source struct {
	Kind     string `json:"kind"`     // "dir", "https" or "http"
	Root     string `json:"root"`     // absolute clean directory, or URL without a trailing slash
	Key      string `json:"key"`      // record slot: OfficialSlot, or "repo-" + hex sha256 of Root
	Explicit bool   `json:"explicit"` // selected with --repo or BARN_REPO
	Official bool   `json:"official"` // one of the two official roots (OfficialRepository)
}

// ParseSource normalizes a repository location: an https:// or http://
// URL in its canonical form (see canonicalURL: no credentials, query or
// fragment; scheme and host lower-cased, IDNA hosts as ASCII, one trailing
// dot, an empty, zero-padded or default port normalised, IPv6 bracketed,
// the path cleaned) or an absolute directory path (cleaned; symlinks are
// not resolved: a repository is what the user named, so repointing a link
// cannot start a fresh trust record). Either official root, however it was
// spelled and over either scheme, is the official repository. A URL that
// has no canonical form is a usage error (reason "bad_repository") naming it.
func ParseSource(loc string, explicit bool) (Source, error) {
	if l := strings.ToLower(loc); strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "http://") {
		u, err := canonicalURL(loc)
		if err != nil {
			return Source{}, exitcode.New(exitcode.Usage, "repository %q: %v", loc, err).WithReason("bad_repository")
		}
		root := u.String()
		if isOfficialRoot(u) {
			s := officialSource(root)
			s.Kind, s.Explicit = u.Scheme, explicit
			return s, nil
		}
		return Source{Kind: u.Scheme, Root: root, Key: slotKey(root), Explicit: explicit}, nil
	}
	if strings.Contains(loc, "://") {
		return Source{}, exitcode.New(exitcode.Usage, "repository %q: only directories, https:// and http:// URLs are supported", loc).WithReason("bad_repository")
	}
	if !filepath.IsAbs(loc) {
		return Source{}, exitcode.New(exitcode.Usage, "repository %q: a directory repository must be an absolute path", loc).WithReason("bad_repository")
	}
	root := filepath.Clean(loc)
	return Source{Kind: "dir", Root: root, Key: slotKey(root), Explicit: explicit}, nil
}

// isOfficialRoot reports whether canonical URL u names one of the two
// official roots (compared in canonical form, over https or http).
func isOfficialRoot(u *url.URL) bool {
	o := OfficialRepository()
	for _, r := range []string{o.Root, o.Mirror} {
		c, err := canonicalURL(r)
		if err == nil && c.Host == u.Host && c.Path == u.Path {
			return true
		}
	}
	return false
}

func slotKey(root string) string {
	s := sha256.Sum256([]byte(root))
	return "repo-" + hex.EncodeToString(s[:])
}

// RequiresSignature reports whether every catalog from s must carry a
// valid signature by a trusted key: the official repository (however it
// was selected) and plain HTTP always do. An explicitly selected directory
// or HTTPS repository may be unsigned (choosing it is the trust decision)
// until it has once been accepted under a trusted signature; from then on
// Record.SignatureRequired keeps requiring one (see Store.Activate).
func (s Source) RequiresSignature() bool { return s.Kind == "http" || !s.Explicit || s.Official }

// Alternates lists the sources that may serve s's artifacts when s cannot:
// for an official root the other official root (the same catalog, so the
// same size and SHA-256 are verified); for any other repository none.
// Catalog updates never use alternates.
func (s Source) Alternates() []Source {
	if !s.Official {
		return nil
	}
	primary, mirror := OfficialRepository().Sources()
	if withoutScheme(s.Root) == withoutScheme(mirror.Root) {
		return []Source{primary}
	}
	return []Source{mirror}
}

func withoutScheme(root string) string {
	_, rest, _ := strings.Cut(root, "://")
	return rest
}

// Join returns the location of a repository-relative file.
func (s Source) Join(rel string) string {
	if s.Kind == "dir" {
		return filepath.Join(s.Root, filepath.FromSlash(rel))
	}
	return s.Root + "/" + rel
}

// Select applies the repository precedence of Barn 0.9: --repo (flag) >
// --mirror > BARN_REPO (env) > the official repository compiled into the
// binary. The compiled default is never "explicit", so its catalogs always
// need a signature by an official key.
func Select(flag string, mirror bool, env string) (Source, error) {
	primary, mir := OfficialRepository().Sources()
	switch {
	case flag != "":
		return ParseSource(flag, true)
	case mirror:
		mir.Explicit = true
		return mir, nil
	case env != "":
		return ParseSource(env, true)
	}
	return primary, nil
}

// MaxRedirects is how many redirects one catalog or image request follows.
const MaxRedirects = 5

// ErrRedirectRefused wraps every redirect NewHTTPClient's clients refuse:
// a sixth redirect, https to anything but https, or a URL with credentials.
var ErrRedirectRefused = errors.New("redirect refused")

// NewHTTPClient returns the client used for catalogs and images: at most
// MaxRedirects redirects, never from https to http, never to a URL with
// credentials (errors wrap ErrRedirectRefused), and the given response
// header timeout (no total deadline: image downloads rely on a stall
// watchdog). Server certificates are checked against the system trust
// store, which SSL_CERT_FILE and SSL_CERT_DIR replace (Go's crypto/x509).
func NewHTTPClient(headerTimeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = headerTimeout
	tr.Proxy = nil
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			// via holds every request so far: the original one and each
			// redirect already followed.
			if len(via) > MaxRedirects {
				return fmt.Errorf("%w: stopped after %d redirects", ErrRedirectRefused, MaxRedirects)
			}
			if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
				return fmt.Errorf("%w: from https to %s (%s)", ErrRedirectRefused, req.URL.Scheme, req.URL.Redacted())
			}
			if req.URL.User != nil {
				return fmt.Errorf("%w: to a URL with credentials", ErrRedirectRefused)
			}
			return nil
		},
	}
}
