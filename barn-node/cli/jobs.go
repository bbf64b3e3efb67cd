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
	Jobs *string `short:"j" name:"jobs" placeholder:"N" help:"Nodes worked on at once, 1-16 (default: $BARN_JOBS, else 4)."`
}

// jobs is the lifecycle concurrency (lifecycle.Manager.Concurrency) from
// --jobs, else BARN_JOBS, else 0 (lifecycle.DefaultJobs). Both are read
// alike, as decimal: anything else, and a number outside
// 1..lifecycle.MaxJobs (an explicit --jobs 0 included: Jobs is a pointer
// so that it is told apart from no flag), is a usage error (bad_jobs)
// naming where it came from. Commands read it before they ask or act, so
// a bad value is refused before anyone is asked.
func (f jobsFlag) jobs(env *tool.Env) (int, error) {
	v, from, next := env.Getenv(envJobs), envJobs, "unset "+envJobs
	if f.Jobs != nil {
		v, from, next = *f.Jobs, "--jobs", ""
	} else if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, exitcode.New(exitcode.Usage, "%s %q is not a number of nodes (1-%d)", from, v, lifecycle.MaxJobs).
			WithReason("bad_jobs").WithNext(next)
	}
	if n < 1 || n > lifecycle.MaxJobs {
		return 0, exitcode.New(exitcode.Usage, "%s %d is out of range: between 1 and %d nodes at once", from, n, lifecycle.MaxJobs).
			WithReason("bad_jobs")
	}
	return n, nil
}
