package vm_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/vm"
)

// scriptedQMP serves QMP on sock: greeting, capabilities, and answer(cmd)
// for every other command (nil closes the connection), recording what it
// was sent. after(cmd) runs once the reply to cmd is written.
type scriptedQMP struct {
	mu   sync.Mutex
	got  []string
	name string
	uuid string
}

func (q *scriptedQMP) serve(t *testing.T, sock string, after func(cmd string)) {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				enc, sc := json.NewEncoder(c), bufio.NewScanner(c)
				enc.Encode(map[string]any{"QMP": map[string]any{"version": map[string]any{}, "capabilities": []string{}}})
				for sc.Scan() {
					var req struct {
						Execute string `json:"execute"`
						ID      any    `json:"id"`
					}
					json.Unmarshal(sc.Bytes(), &req)
					ret := map[string]any{}
					switch req.Execute {
					case "query-name":
						ret["name"] = q.name
					case "query-uuid":
						ret["UUID"] = q.uuid
					case "qmp_capabilities":
					default:
						q.mu.Lock()
						q.got = append(q.got, req.Execute)
						q.mu.Unlock()
					}
					enc.Encode(map[string]any{"return": ret, "id": req.ID})
					if after != nil {
						after(req.Execute)
					}
				}
			}()
		}
	}()
}

func (q *scriptedQMP) commands() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.got...)
}

// TestStopCommandGoesToTheQEMUThatProvedItsIdentity: the QMP socket path
// is swapped for an impostor's the moment the genuine QEMU has told its
// UUID. Had the identity been checked on one connection and the command
// sent on another, system_powerdown would reach the impostor; on one
// session it reaches the QEMU that proved who it is, and the impostor,
// which answers as another VM, is never sent a command.
func TestStopCommandGoesToTheQEMUThatProvedItsIdentity(t *testing.T) {
	f := newFixture(t, fakeBin)
	if err := os.MkdirAll(f.rt.Directory, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := f.rt.BarnQMP
	impostorSock := filepath.Join(t.TempDir(), "impostor.sock")
	impostor := &scriptedQMP{name: "other", uuid: f.uuid}
	impostor.serve(t, impostorSock, nil)
	genuine := &scriptedQMP{name: f.node, uuid: f.uuid}
	var once sync.Once
	genuine.serve(t, sock, func(cmd string) {
		if cmd == "query-uuid" {
			once.Do(func() { os.Rename(impostorSock, sock) })
		}
	})

	o := quick()
	err := vm.Stop(context.Background(), f.target(nil), o)
	if got := impostor.commands(); len(got) != 0 {
		t.Fatalf("the impostor was sent %q", got)
	}
	if got := genuine.commands(); len(got) != 1 || got[0] != "system_powerdown" {
		t.Errorf("the genuine QEMU was sent %q, want system_powerdown", got)
	}
	// The genuine QEMU ignored the powerdown; the next step meets the
	// impostor, which answers as another VM: integrity, nothing sent.
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Integrity || e.Reason != "qmp_identity_mismatch" {
		t.Errorf("stop: %v, want the impostor refused as an identity mismatch", err)
	}
}
