package testexec

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// Many goroutines write fresh scripts and run each at once, while the
// others fork: no exec fails with "text file busy".
func TestWriteScriptThenRunUnderForks(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				p := filepath.Join(dir, "s"+strconv.Itoa(g)+"-"+strconv.Itoa(i))
				if err := WriteScript(p, []byte("#!/bin/sh\nexit 0\n")); err != nil {
					errs <- err
					return
				}
				if out, err := exec.Command(p).CombinedOutput(); err != nil {
					errs <- &exec.Error{Name: p + " (" + string(out) + ")", Err: err}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
