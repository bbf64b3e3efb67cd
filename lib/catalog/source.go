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
	Key      string `json:"key"`      // record slot: "repo-" + hex sha256 of Root
	Explicit bool   `json:"explicit"` // selected with --repo or BARN_REPO (not the configured default)
}

// ErrNoRepository is returned by Select when no repository is selected
// and no default is configured.
var ErrNoRepository = errors.New("no image repository is selected")

// ParseSource normalizes a repository location: an https:// or http://
// URL (no credentials, query or fragment) or an absolute directory path.
func ParseSource(loc string, explicit bool) (Source, error) {
	if strings.HasPrefix(loc, "https://") || strings.HasPrefix(loc, "http://") {
		u, err := url.Parse(loc)
		if err != nil {
			return Source{}, exitcode.New(exitcode.Usage, "repository %q: %v", loc, err)
		}
		if u.Host == "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(loc, "#") {
			return Source{}, exitcode.New(exitcode.Usage, "repository %q: a repository URL has a host and no credentials, query or fragment", loc).WithReason("bad_repository")
		}
		root := strings.TrimRight(u.String(), "/")
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

func slotKey(root string) string {
	s := sha256.Sum256([]byte(root))
	return "repo-" + hex.EncodeToString(s[:])
}

// RequiresSignature reports whether catalogs from s must carry a valid
// signature by a trusted key: plain HTTP and the configured default always
// do; an explicitly selected directory or HTTPS repository may be unsigned
// (choosing it is the trust decision).
func (s Source) RequiresSignature() bool { return s.Kind == "http" || !s.Explicit }

// Join returns the location of a repository-relative file.
func (s Source) Join(rel string) string {
	if s.Kind == "dir" {
		return filepath.Join(s.Root, filepath.FromSlash(rel))
	}
	return s.Root + "/" + rel
}

// Select applies the precedence --repo (flag) > BARN_REPO > configured
// default (def, may be ""). The configured default is never "explicit",
// even when named by --repo or BARN_REPO, so its catalogs always need a
// trusted signature. It returns ErrNoRepository (wrapped in a usage error)
// when all are empty.
func Select(flag, env, def string) (Source, error) {
	pick := func(loc string) (Source, error) {
		s, err := ParseSource(loc, true)
		if err == nil && def != "" {
			if d, derr := ParseSource(def, false); derr == nil && d.Root == s.Root {
				s.Explicit = false
			}
		}
		return s, err
	}
	switch {
	case flag != "":
		return pick(flag)
	case env != "":
		return pick(env)
	case def != "":
		return ParseSource(def, false)
	}
	return Source{}, exitcode.Wrap(exitcode.Usage, ErrNoRepository, "give --repo DIR|URL, set BARN_REPO, or configure a default with barn-repo update --repo DIR|URL --set-default").
		WithReason("no_repository")
}

// NewHTTPClient returns the client used for catalogs and images: at most 5
// redirects, never from https to http, and the given response header
// timeout (no total deadline: image downloads rely on a stall watchdog).
func NewHTTPClient(headerTimeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = headerTimeout
	tr.Proxy = nil
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return fmt.Errorf("stopped after 5 redirects")
			}
			if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
				return fmt.Errorf("refusing a redirect from https to %s", req.URL.Scheme)
			}
			if req.URL.User != nil {
				return fmt.Errorf("refusing a redirect to a URL with credentials")
			}
			return nil
		},
	}
}
