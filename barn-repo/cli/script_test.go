package cli

import (
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/lib/scripttest"
)

func TestMain(m *testing.M) {
	// The official repository of the tools run below is the one the script
	// describes with BARN_TEST_OFFICIAL_*, when it does.
	scripttest.SubstituteOfficialFromEnv()
	testscript.Main(m, map[string]func(){
		"barn-repo": scripttest.Command(Main),
	})
}

// TestScripts runs testdata/script/*.txtar. Scripts needing qemu-img use
// the [exec:qemu-img] condition; it is installed on Barn's CI machines.
func TestScripts(t *testing.T) {
	scripttest.Run(t, scripttest.Configure(testscript.Params{
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
// CA certificate (PEM) to CAFILE and sets $VAR to the URL and $VAR_PORT to
// its port (the certificate is for 127.0.0.1 and localhost). Clients trust
// it only through SSL_CERT_FILE=CAFILE (Go's system-store override). The
// server logs every request to $WORK/VAR.log and injects faults chosen by
// a path prefix (see faultyRepo); /tohttp/ redirects to a plain-HTTP
// server for the same DIR, which logs to $WORK/VAR.plain.log.
func cmdServeRepoTLS(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: serve-repo-tls VAR DIR CAFILE")
	}
	ca, err := scripttest.NewTestCA()
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[2]), ca.CertPEM, 0o644))
	dir, log := ts.MkAbs(args[1]), ts.MkAbs(args[0]+".log")
	plainLn, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	plain := &http.Server{Handler: faultyRepo(dir, "", ts.MkAbs(args[0]+".plain.log")), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = plain.Serve(plainLn) }()
	ts.Defer(func() { _ = plain.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	srv := &http.Server{Handler: faultyRepo(dir, "http://"+plainLn.Addr().String(), log), ReadHeaderTimeout: 10 * time.Second, TLSConfig: ca.ServerConfig()}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	ts.Defer(func() { _ = srv.Close() })
	ts.Setenv(args[0], "https://"+ln.Addr().String())
	ts.Setenv(args[0]+"_PORT", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
}

// faultyRepo serves dir, first applying the fault its path prefix names,
// so a repository root can carry it:
//
//	/rN/REST      redirects to /r(N-1)/REST; /r0/REST serves REST
//	/tohttp/REST  redirects to plain + "/REST" (a downgrade to http)
//	/cut/REST     without a Range header sends half the file, then breaks
//	              the connection; with one, serves the range
//
// Each request is appended to logFile as "GET PATH range=RANGE".
func faultyRepo(dir, plain, logFile string) http.Handler {
	var mu sync.Mutex
	files := http.FileServer(http.Dir(dir))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if f, err := os.OpenFile(logFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(f, "%s %s range=%s\n", r.Method, r.URL.Path, r.Header.Get("Range"))
			f.Close()
		}
		mu.Unlock()
		first, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		switch {
		case len(first) > 1 && first[0] == 'r' && strings.Trim(first[1:], "0123456789") == "":
			n, _ := strconv.Atoi(first[1:])
			to := "/" + rest
			if n > 0 {
				to = fmt.Sprintf("/r%d/%s", n-1, rest)
			}
			if n == 0 {
				r.URL.Path = to
				files.ServeHTTP(w, r)
				return
			}
			http.Redirect(w, r, to, http.StatusFound)
		case first == "tohttp" && plain != "":
			http.Redirect(w, r, plain+"/"+rest, http.StatusFound)
		case first == "cut" && r.Header.Get("Range") == "":
			data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rest)))
			if err != nil {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(data[:len(data)/2])
			if fl, ok := w.(http.Flusher); ok {
				fl.Flush()
			}
			panic(http.ErrAbortHandler) // drop the connection mid-body
		case first == "cut":
			r.URL.Path = "/" + rest
			files.ServeHTTP(w, r)
		default:
			files.ServeHTTP(w, r)
		}
	})
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
