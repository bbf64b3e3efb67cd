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

func (c *countingImages) Ensure(context.Context, imageref.Identity, func(int64)) (string, error) {
	return "", nil
}
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

// pullingImages is an Images whose Ensure waits until want calls are in,
// then lets the first call of image "d12" pull (20 and then 40 bytes)
// while the other calls wait for it, as the cache's lock makes them.
type pullingImages struct {
	mu      sync.Mutex
	entered int
	puller  bool          // a call of d12 pulls
	all     chan struct{} // closed once want calls are in
	pulled  chan struct{} // closed once the pull is done
	want    int
}

func (p *pullingImages) Ensure(_ context.Context, id imageref.Identity, received func(int64)) (string, error) {
	p.mu.Lock()
	p.entered++
	first := id.Image == "d12" && !p.puller
	p.puller = p.puller || first
	if p.entered == p.want {
		close(p.all)
	}
	p.mu.Unlock()
	<-p.all
	if id.Image != "d12" {
		return "/cache/" + id.File, nil
	}
	if !first {
		<-p.pulled
		return "/cache/" + id.File, nil
	}
	received(20)
	received(40)
	close(p.pulled)
	return "/cache/" + id.File, nil
}

func (p *pullingImages) Verify(context.Context, imageref.Identity) (string, error) { return "", nil }

// TestPullBytesReachEveryWaitingNode: the nodes of one command waiting on
// the same base image all see its pull's byte count and the phase
// "pulling IMAGE@VERSION", whichever of them pulls; a node of another
// image, and a node no longer waiting, see nothing.
func TestPullBytesReachEveryWaitingNode(t *testing.T) {
	d12 := imageref.Identity{Image: "d12", Version: "1", File: "images/d12.qcow2", SHA256: "aaa"}
	u24 := imageref.Identity{Image: "u24", Version: "2", File: "images/u24.qcow2", SHA256: "bbb"}
	imgs := &pullingImages{all: make(chan struct{}), pulled: make(chan struct{}), want: 4}
	var mu sync.Mutex
	bytes, phases := map[string]int64{}, map[string]string{}
	m := &Manager{Images: imgs,
		Bytes: func(node string, n int64) { mu.Lock(); bytes[node] = n; mu.Unlock() },
		Phase: func(node, phase string, _ bool) { mu.Lock(); phases[node] = phase; mu.Unlock() }}
	var wg sync.WaitGroup
	for _, node := range []string{"pg-1", "pg-2", "pg-3"} {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = m.ensureBase(context.Background(), d12, node) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); _, _ = m.ensureBase(context.Background(), u24, "other") }()
	wg.Wait()
	for _, node := range []string{"pg-1", "pg-2", "pg-3"} {
		if bytes[node] != 40 || phases[node] != "pulling d12@1" {
			t.Errorf("%s: bytes %d phase %q, want 40 and pulling d12@1", node, bytes[node], phases[node])
		}
	}
	if _, ok := bytes["other"]; ok {
		t.Errorf("a node of another image got bytes: %v", bytes)
	}
	if len(m.pulls[baseKey(d12)]) != 0 {
		t.Errorf("nodes still waiting after their Ensure returned: %v", m.pulls)
	}
}
