// Package safefiletest attacks readers with a symlink swap: the path a
// reader checks is a harmless regular file one moment and a symlink to
// something else the next. A reader that checks the path and then opens
// it again sooner or later reads through the symlink; one that opens once
// without following symlinks and checks the descriptor never does.
package safefiletest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// SwapRace (path must be inside a t.TempDir) alternates path between a regular file holding good (mode) and
// a symlink to target, while read is called repeatedly for up to budget
// (or 20000 reads). It fails t when any read reports the symlink target's
// content: leaked(result) decides that for each successful read.
func SwapRace(t *testing.T, path string, good []byte, mode os.FileMode, target string, budget time.Duration, read func() (string, error), leaked func(string) bool) {
	t.Helper()
	staging := t.TempDir() // same filesystem as path (a t.TempDir too), so rename(2) is atomic
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		reg, lnk := filepath.Join(staging, "reg"), filepath.Join(staging, "lnk")
		for i := 0; ; i++ {
			select {
			case <-stop:
				_ = os.WriteFile(reg, good, mode)
				_ = os.Chmod(reg, mode)
				_ = os.Rename(reg, path)
				return
			default:
			}
			if i%2 == 0 {
				if os.WriteFile(reg, good, mode) == nil && os.Chmod(reg, mode) == nil {
					_ = os.Rename(reg, path)
				}
			} else if os.Symlink(target, lnk) == nil {
				_ = os.Rename(lnk, path)
			}
		}
	}()
	deadline := time.Now().Add(budget)
	var leak string
	for n := 0; n < 20000 && time.Now().Before(deadline); n++ {
		got, err := read()
		if err == nil && leaked(got) {
			leak = got
			break
		}
	}
	close(stop)
	wg.Wait()
	if leak != "" {
		t.Fatalf("read through a symlink swapped in after the check: %s", leak)
	}
}
