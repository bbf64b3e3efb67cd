package guest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"barn.dev/lib/exitcode"
)

// DefaultMaxSkew is the largest guest clock difference to the host that
// Barn accepts without a warning (check, time status, start and resume):
// one second, well inside etcd's and Patroni's tolerance, and far above
// what one SSH round trip on loopback leaves uncertain.
const DefaultMaxSkew = time.Second

// ClockSample is one exchange inside an established SSH session: the host
// clock when it asked, the guest's clock (date +%s.%N) as answered, and
// the host clock when the answer arrived. The session's own set-up (key
// exchange, login) lies outside the exchange, so it costs no accuracy.
type ClockSample struct {
	Sent     time.Time `json:"-"`
	Guest    time.Time `json:"-"`
	Received time.Time `json:"-"`
}

// RTT is the exchange's round trip (host clock).
func (s ClockSample) RTT() time.Duration { return s.Received.Sub(s.Sent) }

// Skew is the guest's clock minus the host's at the round trip's middle
// (positive: the guest is ahead).
func (s ClockSample) Skew() time.Duration { return s.Guest.Sub(s.Sent.Add(s.RTT() / 2)) }

// Uncertainty bounds Skew's error: half the round trip (the guest read its
// clock somewhere inside it).
func (s ClockSample) Uncertainty() time.Duration { return s.RTT() / 2 }

// Within reports whether the skew may be within max: |skew| minus the
// uncertainty is at most max (a doubt counts in the guest's favour).
func (s ClockSample) Within(max time.Duration) bool {
	return absDuration(s.Skew())-s.Uncertainty() <= max
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// clockScript is the guest side of ReadClock: "ready" once the session
// runs, then one clock reading per line it is sent, until stdin closes.
const clockScript = `export LC_ALL=C; echo ready; while read -r _; do date +%s.%N; done`

// clockSamples is how many exchanges ReadClock makes; it keeps the one
// with the shortest round trip (the least uncertain), as NTP does.
const clockSamples = 5

// ReadClock measures t's clock against the host's over one management SSH
// session: after the session is up it exchanges clockSamples lines and
// returns the sample with the shortest round trip. Errors: no session
// within ctx (runtime), an answer that is not a clock (runtime).
func ReadClock(ctx context.Context, t Target) (ClockSample, error) {
	argv, err := ExecArgv(t, []string{"sh", "-c", clockScript})
	if err != nil {
		return ClockSample{}, err
	}
	return readClock(ctx, argv, clockSamples)
}

// readClock runs argv (a clockScript session) and exchanges n lines.
func readClock(ctx context.Context, argv []string, n int) (ClockSample, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = time.Second // a child holding stdout does not outlive ctx by more
	in, err := cmd.StdinPipe()
	if err != nil {
		return ClockSample{}, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return ClockSample{}, err
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		return ClockSample{}, exitcode.Wrap(exitcode.Capability, err, "run %s", argv[0]).WithReason("ssh_missing")
	}
	best, xerr := exchange(in, bufio.NewReader(out), n)
	_ = in.Close()
	werr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return ClockSample{}, fmt.Errorf("no clock reading within the deadline (paused, or its management link is down)")
	case xerr != nil && werr != nil:
		return ClockSample{}, fmt.Errorf("clock session: %v %s", werr, strings.TrimSpace(errb.String()))
	case xerr != nil:
		return ClockSample{}, xerr
	}
	return best, nil
}

// exchange waits for "ready", then sends n lines and keeps the reading
// with the shortest round trip.
func exchange(w io.Writer, r *bufio.Reader, n int) (ClockSample, error) {
	line, err := r.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		return ClockSample{}, fmt.Errorf("clock session did not start (got %q)", strings.TrimSpace(line))
	}
	var best ClockSample
	for i := 0; i < n; i++ {
		sent := time.Now()
		if _, err := io.WriteString(w, "\n"); err != nil {
			return ClockSample{}, err
		}
		line, err := r.ReadString('\n')
		received := time.Now()
		if err != nil {
			return ClockSample{}, fmt.Errorf("clock session ended early: %v", err)
		}
		g, err := ParseClock(strings.TrimSpace(line))
		if err != nil {
			return ClockSample{}, err
		}
		s := ClockSample{Sent: sent, Guest: g, Received: received}
		if i == 0 || s.RTT() < best.RTT() {
			best = s
		}
	}
	return best, nil
}

// ParseClock reads date +%s.%N ("1700000000.123456789") as a time; the
// fraction has at most nine digits.
func ParseClock(s string) (time.Time, error) {
	sec, frac, _ := strings.Cut(s, ".")
	secs, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || len(frac) > 9 || (frac != "" && strings.Trim(frac, "0123456789") != "") {
		return time.Time{}, fmt.Errorf("not a clock reading (date +%%s.%%N): %q", s)
	}
	ns, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
	return time.Unix(secs, ns), nil
}

// setClockScript steps the guest's system clock by $1 seconds ("+30.25",
// "-0.8") as a relative date(1) item: GNU date adds the step to its own
// clock reading the instant it runs, so neither the session's latency nor
// sudo's start-up (over a second in a TCG guest, seen live) nor any helper
// process enters the correction. sudo -n: the login user's passwordless
// sudo (never a password prompt).
const setClockScript = `export LC_ALL=C; exec sudo -n date -s "$1 seconds" >/dev/null`

// SetClock steps t's system clock back by skew (a skew from ReadClock: the
// guest minus the host), over the management session; it needs no network
// in the guest. Only the system clock moves: the emulated RTC is QEMU's,
// which takes the host's time (to the second) at every boot. Errors: the
// remote command's failure with its stderr (runtime), e.g. sudo refused.
func SetClock(ctx context.Context, t Target, skew time.Duration) error {
	argv, err := ExecArgv(t, []string{"sh", "-c", setClockScript, "barn-time-sync", clockStep(skew)})
	if err != nil {
		return err
	}
	var errb strings.Builder
	code, err := Run(ctx, argv, Streams{In: strings.NewReader(""), Out: io.Discard, Err: &errb})
	if err != nil {
		return err
	}
	if code != 0 {
		return exitcode.New(exitcode.Runtime, "setting the clock on %s exited %d: %s", t.Node, code, strings.TrimSpace(errb.String())).
			WithReason("clock_set_failed")
	}
	return nil
}

// clockStep is the signed step, in seconds with microseconds, that undoes
// skew: "+30.250000" for a guest 30.25 s behind.
func clockStep(skew time.Duration) string {
	return strconv.FormatFloat(-skew.Seconds(), 'f', 6, 64)
}

// Milliseconds renders d in milliseconds rounded to 0.1 ms, as the
// documents carry it.
func Milliseconds(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Millisecond)*10) / 10
}
