package cli

import (
	"encoding/hex"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/lib/scripttest"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"barn-repo": scripttest.Command(Main),
	})
}

// TestScripts runs testdata/script/*.txtar. Scripts needing qemu-img use
// the [exec:qemu-img] condition; it is installed on Barn's CI machines.
func TestScripts(t *testing.T) {
	testscript.Run(t, scripttest.Configure(testscript.Params{
		Dir: "testdata/script",
		Cmds: map[string]func(*testscript.TestScript, bool, []string){
			"serve-repo":     cmdServeRepo,
			"serve-repo-tls": cmdServeRepoTLS,
			"patch":          cmdPatch,
		},
		Setup: func(env *testscript.Env) error {
			env.Setenv("BARN_HOME", env.WorkDir+"/.barn")
			env.Setenv("BARN_REPO", "")
			return nil
		},
	}))
}

// cmdServeRepo runs `serve-repo VAR DIR`: serves DIR over HTTP on
// 127.0.0.1 for the rest of the script and sets $VAR to its URL.
func cmdServeRepo(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: serve-repo VAR DIR")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ts.Fatalf("serve-repo: %v", err)
	}
	var hits atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.FileServer(http.Dir(ts.MkAbs(args[1]))).ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	ts.Defer(func() { _ = srv.Close() })
	ts.Setenv(args[0], "http://"+ln.Addr().String())
}

// cmdServeRepoTLS runs `serve-repo-tls VAR DIR CAFILE`: serves DIR over
// HTTPS on 127.0.0.1 with a certificate from a fresh test CA, writes the
// CA certificate (PEM) to CAFILE and sets $VAR to the URL. Clients trust
// it only through SSL_CERT_FILE=CAFILE (Go's system-store override).
func cmdServeRepoTLS(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: serve-repo-tls VAR DIR CAFILE")
	}
	ca, err := scripttest.NewTestCA()
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[2]), ca.CertPEM, 0o644))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	srv := &http.Server{Handler: http.FileServer(http.Dir(ts.MkAbs(args[1]))), ReadHeaderTimeout: 10 * time.Second, TLSConfig: ca.ServerConfig()}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	ts.Defer(func() { _ = srv.Close() })
	ts.Setenv(args[0], "https://"+ln.Addr().String())
}

// cmdPatch runs `patch FILE OFFSET HEX`: overwrites bytes of FILE at
// decimal OFFSET with the hex-encoded HEX (crafting qcow2 headers and
// tampering with images).
func cmdPatch(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: patch FILE OFFSET HEX")
	}
	off, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		ts.Fatalf("patch: offset: %v", err)
	}
	b, err := hex.DecodeString(strings.ReplaceAll(args[2], " ", ""))
	if err != nil {
		ts.Fatalf("patch: hex: %v", err)
	}
	p := ts.MkAbs(args[0])
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		ts.Fatalf("patch: %v", err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		ts.Fatalf("patch: %v", err)
	}
}
