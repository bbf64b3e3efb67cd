package cli

import (
	"context"
	"fmt"
	"sync"
	"time"

	"barn.dev/lib/guest"
	"barn.dev/lib/lifecycle"
	"barn.dev/lib/tool"
)

// clockWarnTimeout bounds each node's clock reading after a start or
// resume (the guest answered readiness, or was running before its pause).
const clockWarnTimeout = 15 * time.Second

// warnSkew measures (measureClock, as `time status` does) the clock of
// every node res shows freshly running — started or restarted with its
// readiness proven, or resumed — and, beyond guest.DefaultMaxSkew, adds a
// "clock" warning to the node's result and prints it on stderr, naming
// `barn-node time sync NODE`. A boot takes the host's time from QEMU's
// RTC, but a TCG guest drifts, and a paused guest's clock stood still for
// as long as it was paused. A reading that fails is a warning too; the
// command's outcome never depends on it.
func warnSkew(env *tool.Env, res *lifecycle.Result) {
	if res == nil {
		return
	}
	var idx []int
	for i, n := range res.Nodes {
		if ((n.Action == "started" || n.Action == "restarted") && n.Ready) || n.Action == "resumed" {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return
	}
	a, err := loadAccess(env)
	if err != nil {
		env.Stderrf("note: guest clocks not checked: %v", err)
		return
	}
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Add(1)
		go func(nr *lifecycle.NodeResult) {
			defer wg.Done()
			if d := skewWarning(env, a, nr.Name); d != "" {
				nr.Warnings = append(nr.Warnings, lifecycle.Warning{Stage: "clock", Detail: d})
				env.Stderrf("warning: %s: %s", nr.Name, d)
			}
		}(&res.Nodes[i])
	}
	wg.Wait()
}

// skewWarning is the warning for name's clock, "" when it is within the
// threshold.
func skewWarning(env *tool.Env, a *access, name string) string {
	t, err := a.target(env, name)
	if err == nil {
		ctx, cancel := context.WithTimeout(env.Ctx, clockWarnTimeout)
		defer cancel()
		var c ClockReading
		if c, err = measureClock(ctx, t, guest.DefaultMaxSkew); err == nil {
			if c.OK {
				return ""
			}
			return fmt.Sprintf("guest clock is %+.1f s from the host's (±%.1f ms), beyond %s; correct it with: barn-node time sync %s",
				c.skew.Seconds(), c.UncertaintyMS, guest.DefaultMaxSkew, name)
		}
	}
	return fmt.Sprintf("guest clock not measured (%v); check it with: barn-node time status %s", err, name)
}
