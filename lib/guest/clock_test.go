package guest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"barn.dev/lib/testexec"
)

// The guest side of ReadClock is plain sh and date, run here in place of
// the SSH session: a clock read on the host itself lies within the
// exchange's round trip, so its skew is within its uncertainty.
func TestReadClockOfTheSameClockIsWithinItsUncertainty(t *testing.T) {
	s, err := readClock(context.Background(), []string{"sh", "-c", clockScript}, clockSamples)
	if err != nil {
		t.Fatal(err)
	}
	if s.RTT() <= 0 || s.RTT() > 5*time.Second {
		t.Fatalf("round trip %v", s.RTT())
	}
	if d := absDuration(s.Skew()); d > s.Uncertainty()+time.Millisecond {
		t.Fatalf("skew %v beyond its uncertainty %v", s.Skew(), s.Uncertainty())
	}
	if !s.Within(0) {
		t.Fatalf("%v ± %v not within 0", s.Skew(), s.Uncertainty())
	}
}

// A guest whose date reads 30 s ahead is measured 30 s ahead, and beyond
// the default threshold.
func TestReadClockMeasuresAGuestAhead(t *testing.T) {
	ahead := `date() { awk -v r="$(command date +%s.%N)" 'BEGIN { printf "%.9f\n", r + 30 }'; }; ` + clockScript
	s, err := readClock(context.Background(), []string{"sh", "-c", ahead}, clockSamples)
	if err != nil {
		t.Fatal(err)
	}
	if d := absDuration(s.Skew() - 30*time.Second); d > s.Uncertainty()+time.Millisecond {
		t.Fatalf("skew %v ± %v, want 30s", s.Skew(), s.Uncertainty())
	}
	if s.Within(DefaultMaxSkew) {
		t.Fatal("a 30 s skew is within the default threshold")
	}
}

func TestReadClockRefusesWhatIsNotAClock(t *testing.T) {
	for _, script := range []string{
		"echo ready; read -r _; echo soon",          // not a reading
		"echo hello",                                // never ready
		"echo ready; read -r _; exit 0",             // ends early
		"echo ready; read -r _; echo 12.3456789012", // ten fraction digits
	} {
		if s, err := readClock(context.Background(), []string{"sh", "-c", script}, 2); err == nil {
			t.Errorf("%q: accepted %+v", script, s)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := readClock(ctx, []string{"sh", "-c", "sleep 5"}, 1); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("a silent guest: %v", err)
	}
}

func TestClockSampleArithmetic(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := ClockSample{Sent: t0, Guest: t0.Add(1500 * time.Millisecond), Received: t0.Add(200 * time.Millisecond)}
	if s.RTT() != 200*time.Millisecond || s.Skew() != 1400*time.Millisecond || s.Uncertainty() != 100*time.Millisecond {
		t.Fatalf("rtt %v skew %v unc %v", s.RTT(), s.Skew(), s.Uncertainty())
	}
	// 1.4 s ± 0.1 s may be 1.3 s: beyond 1.2 s, but not proven beyond 1.3 s
	if s.Within(1200*time.Millisecond) || !s.Within(1300*time.Millisecond) {
		t.Fatal("Within does not grant the uncertainty")
	}
	if got, err := ParseClock("1700000000.5"); err != nil || !got.Equal(time.Unix(1700000000, 5e8)) {
		t.Fatalf("ParseClock: %v %v", got, err)
	}
	for _, bad := range []string{"", "x", "1.x", "1.-5", "1.1234567890"} {
		if _, err := ParseClock(bad); err == nil {
			t.Errorf("ParseClock(%q) accepted", bad)
		}
	}
}

// SetClock's guest script hands date(1), under sudo -n, the step as a
// relative item (a sudo that checks -n and a date that records its
// arguments stand in), and GNU date adds such a fractional step, either
// sign, to its own reading (the real date, parsing with -d the item -s
// takes).
func TestSetClockScriptStepsRelativeToTheGuestClock(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "date.args")
	for name, script := range map[string]string{
		"sudo": "#!/bin/sh\n[ \"$1\" = -n ] || exit 9\nshift\nexec \"$@\"\n",
		"date": "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + rec + "\n",
	} {
		if err := testexec.WriteScript(filepath.Join(dir, name), []byte(script)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("sh", "-c", setClockScript, "barn-time-sync", clockStep(-30250*time.Millisecond))
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "-s\n30.250000 seconds\n"; got != want {
		t.Fatalf("date got %q, want %q", got, want)
	}

	for _, skew := range []time.Duration{-30250 * time.Millisecond, 883 * time.Millisecond} {
		before := time.Now()
		out, err := exec.Command("date", "-d", clockStep(skew)+" seconds", "+%s.%N").Output()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseClock(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatal(err)
		}
		if d := got.Sub(before.Add(-skew)); d < 0 || d > time.Second {
			t.Errorf("date -d %q: %v, want %v plus a little", clockStep(skew)+" seconds", got, before.Add(-skew))
		}
	}
}
