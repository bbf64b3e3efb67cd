package cli

import (
	"barn.dev/lib/doctor"
	"barn.dev/lib/tool"
)

// doctorCmd is `barn-node doctor` (alias dt, as Barn 0.9): the read-only
// capability report of lib/doctor for what barn-node would launch now.
type doctorCmd struct{}

// DoctorHook, when non-nil, adjusts the doctor's probe for the command's
// environment. Only test binaries set it (to lib/scripttest.DoctorHost),
// like CrashHook; the shipped barn-node probes the real host.
var DoctorHook func(getenv func(string) string, p *doctor.Probe)

// Run emits barn.doctor/v1 and exits 0, or 3 (capability_missing) when a
// capability barn-node needs is missing; network problems alone, which
// `barn-net install` settles, keep exit 0.
func (c *doctorCmd) Run(env *tool.Env) error {
	p := &doctor.Probe{Getenv: env.Getenv, Firmware: firmwarePairs(env)}
	if DoctorHook != nil {
		DoctorHook(env.Getenv, p)
	}
	r := p.Run(env.Ctx)
	return emit(env, r, r.Err())
}
