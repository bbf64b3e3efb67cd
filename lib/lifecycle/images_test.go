package lifecycle

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
)

// countingImages counts Verify calls per digest; digest "bad" fails.
type countingImages struct {
	mu    sync.Mutex
	calls map[string]int
	total atomic.Int32
}

func (c *countingImages) Ensure(context.Context, imageref.Identity) (string, error) { return "", nil }
func (c *countingImages) Verify(_ context.Context, id imageref.Identity) (string, error) {
	c.total.Add(1)
	c.mu.Lock()
	c.calls[id.SHA256]++
	c.mu.Unlock()
	if id.SHA256 == "bad" {
		return "", exitcode.New(exitcode.Integrity, "sha256 mismatch").WithReason("image_mismatch")
	}
	return "/cache/" + id.File, nil
}

// TestVerifyBaseOncePerCommand: a batch start of nodes sharing a base
// hashes it once, concurrently started nodes wait for that one check, each
// distinct base is checked, a failure holds for every node of that base,
// and a base this command's create already verified is not hashed again.
func TestVerifyBaseOncePerCommand(t *testing.T) {
	imgs := &countingImages{calls: map[string]int{}}
	m := &Manager{Images: imgs}
	shared := imageref.Identity{Image: "d12", File: "images/d12.qcow2", SHA256: "aaa"}
	other := imageref.Identity{Image: "u24", File: "images/u24.qcow2", SHA256: "bbb"}
	bad := imageref.Identity{Image: "el9", File: "images/el9.qcow2", SHA256: "bad"}
	created := imageref.Identity{Image: "d13", File: "images/d13.qcow2", SHA256: "ccc"}
	m.verifiedBase(created, "/cache/"+created.File)
	var wg sync.WaitGroup
	errs := make([]error, 12)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			id := []imageref.Identity{shared, other, bad, created}[i%4]
			_, errs[i] = m.verifyBase(context.Background(), id)
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if wantBad := i%4 == 2; (err != nil) != wantBad || wantBad && exitcode.As(err).Reason != "image_mismatch" {
			t.Errorf("node %d: %v", i, err)
		}
	}
	if imgs.calls["aaa"] != 1 || imgs.calls["bbb"] != 1 || imgs.calls["bad"] != 1 || imgs.calls["ccc"] != 0 || imgs.total.Load() != 3 {
		t.Fatalf("verifications = %v (total %d), want one per distinct unverified base", imgs.calls, imgs.total.Load())
	}
	// another command (a new Manager) verifies again
	m2 := &Manager{Images: imgs}
	if _, err := m2.verifyBase(context.Background(), shared); err != nil || imgs.calls["aaa"] != 2 {
		t.Fatalf("a new command did not re-verify: %v, %v", err, imgs.calls)
	}
}
