package cli

import (
	"strconv"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/lifecycle"
	"barn.dev/lib/tool"
)

// envJobs is the default of --jobs.
const envJobs = "BARN_JOBS"

// jobsFlag is --jobs of the multi-node lifecycle commands (apply, start,
// restart, stop, recreate, resize, destroy).
type jobsFlag struct {
	Jobs *int `short:"j" name:"jobs" placeholder:"N" help:"Nodes worked on at once, 1-16 (default: $BARN_JOBS, else 4)."`
}

// setJobs sets m's concurrency from --jobs, else BARN_JOBS, else leaves
// lifecycle.DefaultJobs. Jobs is a pointer so that an explicit --jobs 0 is
// told apart from no flag: a value outside 1..lifecycle.MaxJobs, 0 and
// negatives included, is a usage error (bad_jobs) naming where it came from.
func (f jobsFlag) setJobs(env *tool.Env, m *lifecycle.Manager) error {
	var n int
	from := "--jobs"
	if f.Jobs != nil {
		n = *f.Jobs
	} else {
		v := env.Getenv(envJobs)
		if v == "" {
			return nil
		}
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			return exitcode.New(exitcode.Usage, "%s=%q is not a number of nodes (1-%d)", envJobs, v, lifecycle.MaxJobs).
				WithReason("bad_jobs").WithNext("unset " + envJobs)
		}
		from = envJobs
	}
	if n < 1 || n > lifecycle.MaxJobs {
		return exitcode.New(exitcode.Usage, "%s %d is out of range: between 1 and %d nodes at once", from, n, lifecycle.MaxJobs).
			WithReason("bad_jobs")
	}
	m.Concurrency = n
	return nil
}
