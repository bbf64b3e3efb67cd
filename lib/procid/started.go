package procid

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"barn.dev/lib/vmrecord"
)

// userHZ is the unit of /proc/<pid>/stat's starttime: USER_HZ, which the
// Linux ABI fixes at 100 ticks per second on every architecture Barn runs
// on (sysconf(_SC_CLK_TCK)).
const userHZ = 100

// StartedAt converts a recorded tuple's start time ("procstat:<ticks since
// boot>") to wall-clock time: the host's boot time (/proc/stat btime) plus
// the ticks. ok is false when p was captured on another boot or either
// value cannot be read; the result is for display (uptime), never evidence.
func StartedAt(p vmrecord.Process) (t time.Time, ok bool) {
	ticks, err := strconv.ParseUint(strings.TrimPrefix(p.Started, "procstat:"), 10, 64)
	if err != nil || !strings.HasPrefix(p.Started, "procstat:") {
		return time.Time{}, false
	}
	if boot, err := BootID(); err != nil || boot != p.Boot {
		return time.Time{}, false
	}
	btime, err := bootTime()
	if err != nil {
		return time.Time{}, false
	}
	return btime.Add(time.Duration(ticks) * time.Second / userHZ), true
}

// bootTime is the btime line of /proc/stat: the boot's wall-clock second.
func bootTime() (time.Time, error) {
	f, err := os.Open(procRoot + "/stat")
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, found := strings.CutPrefix(sc.Text(), "btime "); found {
			s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("parsing %s/stat btime %q: %w", procRoot, v, err)
			}
			return time.Unix(s, 0).UTC(), nil
		}
	}
	if err := sc.Err(); err != nil {
		return time.Time{}, err
	}
	return time.Time{}, fmt.Errorf("%s/stat has no btime line", procRoot)
}
