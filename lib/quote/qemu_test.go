package quote

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"barn.dev/lib/qmp"
)

// TestQEMUOptIsReadByQEMU: a real qemu-system-x86_64 opens a QMP socket and
// chardev files at exactly the QEMUOpt-escaped paths (commas, spaces, '#',
// quotes, '=' and non-ASCII text in them), answers on that socket and
// lists every chardev, and creates no file at a mis-split path.
func TestQEMUOptIsReadByQEMU(t *testing.T) {
	bin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 is not installed")
	}
	dir := filepath.Join(t.TempDir(), `q,1 #"'é`)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "qmp,sock")
	names := []string{"a,b", ",,", "x,id=evil", "sp ace", "#hash", `"dq"`, "'sq'", "é ü", "k=v", "trail,"}
	args := []string{"-S", "-nodefaults", "-display", "none", "-machine", "none",
		"-qmp", "unix:" + QEMUOpt(sock) + ",server=on,wait=off"}
	for i, n := range names {
		args = append(args, "-chardev", "file,id=c"+strconv.Itoa(i)+",path="+QEMUOpt(filepath.Join(dir, n)))
	}
	cmd := exec.Command(bin, args...)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill() // our own child
			<-exited
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var chardevs []struct {
		Label    string `json:"label"`
		Filename string `json:"filename"`
	}
	for i := 0; ; i++ {
		err := qmp.Monitor{Socket: sock}.Execute(ctx, "query-chardev", nil, &chardevs)
		if err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("QEMU exited (%v) before answering on %s: %s", waitErr, sock, out)
		default:
		}
		if i > 100 {
			t.Fatalf("QMP on %s: %v: %s", sock, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	got := map[string]string{}
	for _, c := range chardevs {
		got[c.Label] = c.Filename
	}
	for i, n := range names {
		p := filepath.Join(dir, n)
		if _, err := os.Stat(p); err != nil {
			t.Errorf("chardev path %q: %v", p, err)
		}
		if _, ok := got["c"+strconv.Itoa(i)]; !ok {
			t.Errorf("QMP does not list chardev c%d (%s): %v", i, p, got)
		}
	}
	if err := (qmp.Monitor{Socket: sock}).Execute(ctx, "quit", nil, nil); err != nil {
		t.Fatalf("quit: %v", err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("QEMU did not exit after quit")
	}
	if waitErr != nil {
		t.Fatalf("QEMU: %v: %s", waitErr, out)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != len(names) { // the chardev files (QEMU removed its socket), nothing else
		var ls []string
		for _, e := range ents {
			ls = append(ls, e.Name())
		}
		t.Errorf("files in %s: %q", dir, ls)
	}
}

// TestSplitQEMUOpts: values escaped with QEMUOpt and joined with "," split
// back into exactly those values. (A value that begins with a comma, or an
// empty one after a value ending in one, cannot round-trip: QEMU, like this
// reader, pairs commas greedily from the left.)
func TestSplitQEMUOpts(t *testing.T) {
	got := SplitQEMUOpts("unix:/a,,b,server=on,,x,wait=off")
	if want := []string{"unix:/a,b", "server=on,x", "wait=off"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("%q", got)
	}
	vals := []string{"bridge", "br=a,b", "x,,", "helper=/x,y/z,"}
	var esc []string
	for _, v := range vals {
		esc = append(esc, QEMUOpt(v))
	}
	if got := SplitQEMUOpts(strings.Join(esc, ",")); strings.Join(got, "\x00") != strings.Join(vals, "\x00") {
		t.Fatalf("round trip: %q", got)
	}
}
