package imagecache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/imageref"
	"barn.dev/lib/safefile"
	"barn.dev/lib/state"
)

// Defaults of a pull (reference: image stall 2 min, header 60 s).
const (
	DefaultStall         = 2 * time.Minute
	DefaultHeaderTimeout = 60 * time.Second
	DefaultAttempts      = 5
)

// Puller downloads exact artifacts into the cache.
type Puller struct {
	Client   *http.Client     // nil: catalog.NewHTTPClient(DefaultHeaderTimeout)
	Stall    time.Duration    // inactivity watchdog, not a total deadline (DefaultStall)
	Attempts int              // connection attempts per pull, resuming each time (DefaultAttempts)
	Backoff  time.Duration    // first retry delay, doubled per attempt, capped at 10 s (default 500 ms)
	Progress io.Writer        // see Terminal; nil for none
	Now      func() time.Time // clock for progress and .corrupt names
	// Received, when set, is called as bytes of the artifact arrive with
	// the count the staging file holds (a resumed pull's earlier bytes
	// included), for callers that show bytes elsewhere (a lifecycle
	// command's per-node table); it must be quick.
	Received func(n int64)
}

func (p *Puller) defaults() Puller {
	q := *p
	if q.Client == nil {
		q.Client = catalog.NewHTTPClient(DefaultHeaderTimeout)
	}
	if q.Stall <= 0 {
		q.Stall = DefaultStall
	}
	if q.Attempts <= 0 {
		q.Attempts = DefaultAttempts
	}
	if q.Backoff <= 0 {
		q.Backoff = 500 * time.Millisecond
	}
	if q.Now == nil {
		q.Now = time.Now
	}
	return q
}

// StagingPath is where an interrupted download of id waits for a resume:
// named after the expected digest, so bytes meant for another artifact are
// never resumed.
func StagingPath(dest string, id imageref.Identity) string {
	return filepath.Join(filepath.Dir(dest), ".staging-"+id.SHA256+".partial")
}

// Pull downloads id from src into dest: staging file named after the
// digest, HTTP Range resume (restart from zero when the server answers 200),
// a stall watchdog, then byte count, SHA-256 and qcow2 header verification,
// chmod 0444 and an atomic rename. Only verified bytes ever reach dest.
//
// When src cannot deliver — unreachable, the artifact missing, or bytes that
// fail verification (the staging file is then discarded) — Pull tries
// src.Alternates() in order: for an official repository the other official
// root, against the same size and SHA-256; other repositories have none,
// so their pulls are exclusive. Nothing ever falls back to another image.
// The last error is returned, naming the earlier failures; a verification
// failure is an integrity error (7). Cancellation and a full disk stop at
// once.
func (p *Puller) Pull(ctx context.Context, src catalog.Source, id imageref.Identity, dest string) error {
	q := p.defaults()
	if err := state.EnsurePrivateDir(filepath.Dir(dest)); err != nil {
		return err
	}
	sources := append([]catalog.Source{src}, src.Alternates()...)
	var failed []string
	for i, s := range sources {
		err := q.pullFrom(ctx, s, id, dest)
		if err == nil {
			return nil
		}
		e := exitcode.As(err)
		last := i == len(sources)-1
		if last || ctx.Err() != nil || (e.Class != exitcode.Runtime && e.Class != exitcode.Integrity) {
			if len(failed) > 0 {
				c := *e
				c.Message += " (after " + strings.Join(failed, "; ") + ")"
				if c.Err == nil {
					c.Err = err
				}
				return &c
			}
			return err
		}
		failed = append(failed, s.Root+": "+e.Message)
		if q.Progress != nil {
			fmt.Fprintf(q.Progress, "%s: %s; trying %s\n", s.Root, e.Message, sources[i+1].Root)
		}
	}
	return nil // unreachable: the loop returns on its last source
}

// pullFrom is one source's attempt of Pull.
//
// A download that resumed bytes an earlier pull left in the local cache
// and then fails verification proves nothing about the repository: those
// local bytes may be what is wrong. The staging file is discarded, the
// fault is reported as local (on Progress), and the artifact is
// downloaded once more from zero; only a failure of that whole download
// blames the artifact.
func (q Puller) pullFrom(ctx context.Context, src catalog.Source, id imageref.Identity, dest string) error {
	staging := StagingPath(dest, id)
	resumed := false
	if fi, err := os.Lstat(staging); err == nil && fi.Size() > 0 && src.Kind != "dir" {
		resumed = true
	}
	err := q.fetchVerified(ctx, src, id, staging)
	if e := exitcode.As(err); err != nil && resumed && e.Class == exitcode.Integrity {
		if _, serr := os.Lstat(staging); !errors.Is(serr, fs.ErrNotExist) {
			return err // the rejected bytes could not be removed: a resume would reuse them
		}
		if q.Progress != nil {
			fmt.Fprintf(q.Progress, "%s: the partial download an earlier pull left in the local cache did not verify (%s): a local fault, not the repository's; discarded, downloading it again from zero\n", staging, e.Message)
		}
		err = q.fetchVerified(ctx, src, id, staging)
	}
	if err != nil {
		return err
	}
	return publish(staging, dest)
}

// fetchVerified downloads (or copies) id into staging and verifies it;
// rejected bytes are discarded.
func (q Puller) fetchVerified(ctx context.Context, src catalog.Source, id imageref.Identity, staging string) error {
	from := src.Join(id.File)
	label := fmt.Sprintf("%s@%s %s", id.Image, id.Version, id.Arch)
	var err error
	if src.Kind == "dir" {
		err = q.copyLocal(ctx, from, staging, id, label)
	} else {
		err = q.download(ctx, from, staging, id, label)
	}
	if err != nil {
		return err
	}
	m, err := MeasureFile(staging)
	if err == nil {
		err = m.Check(id, from)
	}
	if err != nil {
		err = discardStaging(staging, m.ID, err)
		e := exitcode.As(err)
		if e.Class != exitcode.Integrity {
			return err
		}
		return e.WithNext("barn-repo update   # refresh the catalog; the artifact at " + from + " is not the one it names")
	}
	return nil
}

// discardStaging removes a download that failed verification, by the
// identity of the file that was written or measured (fileid.Remove): a
// file that is not that one (zero id: none was identified) is kept. When
// the download is not removed, err (which keeps its class, reason and
// next step) says so: a resume would otherwise start from the rejected
// bytes.
func discardStaging(staging string, id fileid.ID, err error) error {
	var kept string
	if id.Inode == 0 {
		if _, lerr := os.Lstat(staging); errors.Is(lerr, fs.ErrNotExist) {
			return err
		}
		kept = "Barn could not identify it as the file it wrote"
	} else {
		why, rerr := id.Remove(staging)
		switch {
		case rerr != nil:
			kept = rerr.Error()
		case why == "":
			return err
		default:
			kept = "it is not the file Barn wrote: " + why
		}
	}
	e := *exitcode.As(err)
	e.Message += fmt.Sprintf(" (the rejected download %s could not be removed: %s)", staging, kept)
	return &e
}

// publish makes the verified staging file read-only and moves it to dest
// durably (safefile.Publish: fsync, rename, directory fsync).
func publish(staging, dest string) error {
	if err := safefile.Publish(staging, dest, 0o444); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "publishing image")
	}
	return nil
}

func (q Puller) copyLocal(ctx context.Context, from, staging string, id imageref.Identity, label string) error {
	fi, err := os.Lstat(from)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "reading %s", from).WithReason("artifact_unavailable")
	}
	if !fi.Mode().IsRegular() {
		return exitcode.New(exitcode.Integrity, "%s is not a regular file", from).WithReason("unsafe_image_file")
	}
	if fi.Size() != id.SizeBytes {
		return mismatch(id, from, "size", strconv.FormatInt(id.SizeBytes, 10), strconv.FormatInt(fi.Size(), 10))
	}
	in, err := os.Open(from)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "reading %s", from)
	}
	defer in.Close()
	out, err := os.OpenFile(staging, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "creating %s", staging)
	}
	defer out.Close()
	pr := q.progress(label, id.SizeBytes, 0)
	_, err = io.CopyBuffer(out, &ctxReader{ctx: ctx, r: io.LimitReader(in, id.SizeBytes+1), p: pr}, make([]byte, bufSize))
	pr.Done()
	if err != nil {
		return copyErr(ctx, err, from)
	}
	return out.Sync()
}

func copyErr(ctx context.Context, err error, from string) error {
	if ctx.Err() != nil {
		return exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "pull of %s interrupted; the partial download is kept for a resume", from)
	}
	if errors.Is(err, errNoSpace) {
		return exitcode.Wrap(exitcode.Resource, err, "writing the image cache")
	}
	return exitcode.Wrap(exitcode.Runtime, err, "copying %s", from)
}

var errNoSpace = errors.New("no space left on device")

type ctxReader struct {
	ctx context.Context
	r   io.Reader
	p   progress
}

func (c *ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(b)
	c.p.Add(int64(n))
	return n, err
}

// errRestart asks download to start over from byte zero.
var errRestart = errors.New("restart from zero")

func (q Puller) download(ctx context.Context, url, staging string, id imageref.Identity, label string) error {
	var last error
	delay := q.Backoff
	for attempt := 1; attempt <= q.Attempts; attempt++ {
		err := q.attempt(ctx, url, staging, id, label)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return copyErr(ctx, err, url)
		}
		var ee *exitcode.Error
		if errors.As(err, &ee) {
			return err // classified: not worth retrying
		}
		last = err
		if errors.Is(err, errRestart) {
			continue
		}
		select {
		case <-ctx.Done():
			return copyErr(ctx, ctx.Err(), url)
		case <-time.After(delay):
		}
		delay = min(delay*2, 10*time.Second)
	}
	return exitcode.Wrap(exitcode.Runtime, last, "downloading %s failed after %d attempts; the partial download is kept and the next pull resumes it", url, q.Attempts).
		WithReason("download_failed")
}

// attempt makes one request, resuming from the staging file's size.
// Unclassified errors may be retried; *exitcode.Error ones may not.
func (q Puller) attempt(ctx context.Context, url, staging string, id imageref.Identity, label string) error {
	f, err := os.OpenFile(staging, os.O_CREATE|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "opening %s", staging)
	}
	defer f.Close()
	st := staged{f: f, path: staging}
	if st.id, err = fileid.OfFile(f); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "reading %s", staging)
	}
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "reading %s", staging)
	}
	if have > id.SizeBytes {
		if err := restartAt0(f); err != nil {
			return err
		}
		have = 0
	}
	if have == id.SizeBytes {
		return f.Sync() // complete; verification decides
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	resp, err := q.request(rctx, url, have)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if have, err = resumes(resp, f, url, have); err != nil {
		return err
	}
	return q.receive(ctx, rctx, cancel, resp.Body, st, url, id, label, have)
}

// staged is the open staging file of a download and its identity.
type staged struct {
	f    *os.File
	id   fileid.ID
	path string
}

// request asks url for the bytes from have on (a Range request when have
// is positive); a refused redirect is redirect_refused.
func (q Puller) request(ctx context.Context, url string, have int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Usage, err, "bad artifact URL")
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := q.Client.Do(req)
	if errors.Is(err, catalog.ErrRedirectRefused) {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "downloading %s", url).WithReason("redirect_refused")
	}
	return resp, err
}

// resumes judges resp against the have bytes already in f and returns
// where its body starts: have for a matching partial answer, 0 (f
// emptied) for a whole one; errRestart (f emptied) for a partial answer
// that does not continue f; artifact_unavailable for 403/404/410.
func resumes(resp *http.Response, f *os.File, url string, have int64) (int64, error) {
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != have {
			if err := restartAt0(f); err != nil {
				return 0, err
			}
			return 0, errRestart
		}
		return have, nil
	case resp.StatusCode == http.StatusOK:
		if have > 0 {
			// The server ignored Range: start over, never splice.
			if err := restartAt0(f); err != nil {
				return 0, err
			}
		}
		return 0, nil
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		if err := restartAt0(f); err != nil {
			return 0, err
		}
		return 0, errRestart
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone || resp.StatusCode == http.StatusForbidden:
		return 0, exitcode.New(exitcode.Runtime, "%s: HTTP %s", url, resp.Status).WithReason("artifact_unavailable")
	default:
		return 0, fmt.Errorf("%s: HTTP %s", url, resp.Status)
	}
}

// receive appends body to the staging file until id.SizeBytes (have
// already there), showing progress and cancelling rctx (cancel) when no
// byte arrives for q.Stall. More bytes than the catalog's size discard
// the staging file; a broken transfer keeps what arrived for a resume.
func (q Puller) receive(ctx, rctx context.Context, cancel context.CancelCauseFunc, body io.Reader, st staged, url string, id imageref.Identity, label string, have int64) error {
	pr := q.progress(label, id.SizeBytes, have)
	defer pr.Done()
	// Stall watchdog: cancel the request when no byte arrives for q.Stall.
	watchdog := time.AfterFunc(q.Stall, func() { cancel(fmt.Errorf("no data for %s", q.Stall)) })
	defer watchdog.Stop()
	buf := make([]byte, 256<<10)
	remaining := id.SizeBytes - have
	for remaining > 0 {
		n, rerr := body.Read(buf)
		if n > 0 {
			watchdog.Reset(q.Stall)
			if int64(n) > remaining {
				return discardStaging(st.path, st.id, mismatch(id, url, "size", strconv.FormatInt(id.SizeBytes, 10), "more bytes than that"))
			}
			if _, werr := st.f.Write(buf[:n]); werr != nil {
				if strings.Contains(werr.Error(), "no space left") {
					return exitcode.Wrap(exitcode.Resource, werr, "writing %s", st.path).WithReason("no_space")
				}
				return exitcode.Wrap(exitcode.Runtime, werr, "writing %s", st.path)
			}
			remaining -= int64(n)
			pr.Add(int64(n))
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if serr := st.f.Sync(); serr != nil {
				rerr = errors.Join(rerr, fmt.Errorf("saving the partial download for a resume: %w", serr))
			}
			if cause := context.Cause(rctx); cause != nil && ctx.Err() == nil {
				return fmt.Errorf("download stalled: %w", cause)
			}
			return rerr
		}
	}
	if err := st.f.Sync(); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", st.path)
	}
	if remaining > 0 {
		return fmt.Errorf("connection closed with %d bytes to go", remaining)
	}
	return nil
}

func restartAt0(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "discarding partial download")
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "discarding partial download")
	}
	return nil
}

// rangeStart parses "bytes START-END/TOTAL".
func rangeStart(h string) (int64, bool) {
	rest, ok := strings.CutPrefix(h, "bytes ")
	if !ok {
		return 0, false
	}
	s, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
