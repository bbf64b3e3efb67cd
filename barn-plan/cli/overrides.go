package cli

import (
	"errors"
	"strconv"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/inventory"
	"barn.dev/lib/plan"
	"barn.dev/lib/spec"
)

// overrideFlags are barn-plan's per-command overrides (plan.Overrides):
// each flag, else its BARN_* variable, for the selected nodes of this
// plan only.
type overrideFlags struct {
	Image string `short:"I" name:"image" placeholder:"SELECTOR" help:"Plan the selected nodes with this image (family, family:channel or family@version) instead of the inventory's (default: BARN_IMAGE)."`
	Arch  string `short:"A" name:"arch" placeholder:"ARCH" help:"Plan the deployment for this guest architecture: amd64 (x86_64, x64), arm64 (aarch64, a64) or native (default: BARN_ARCH)."`
	CPU   string `short:"C" name:"cpu" placeholder:"N" help:"Plan the selected nodes with N vCPUs (default: BARN_CPU)."`
	Mem   string `short:"M" name:"mem" placeholder:"SIZE" help:"Plan the selected nodes with this much memory; a bare number is MiB, as vm_mem (default: BARN_MEM)."`
	Disk  string `short:"D" name:"disk" placeholder:"SIZE" help:"Plan the selected nodes with this root disk size; a bare number is GiB, as vm_disk (default: BARN_DISK)."`
}

// overrideSpec is one override: its flag, variable, value field and parser.
type overrideSpec struct {
	flag, env string
	value     *string
	set       func(o *plan.Overrides, v string) (hint string, err error)
}

// resolve reads each override from its flag, else its variable (a flag
// beats its variable), into plan.Overrides; nil when none is given. A
// value that cannot be read is usage (2), reason invalid_override, naming
// the flag or variable, the value and the spelling to use.
func (f *overrideFlags) resolve(getenv func(string) string) (*plan.Overrides, error) {
	o := &plan.Overrides{}
	for _, s := range []overrideSpec{
		{"--image", "BARN_IMAGE", &f.Image, setImage},
		{"--arch", "BARN_ARCH", &f.Arch, setArch},
		{"--cpu", "BARN_CPU", &f.CPU, setCPU},
		{"--mem", "BARN_MEM", &f.Mem, func(o *plan.Overrides, v string) (string, error) { return setSize(&o.MemoryBytes, v, "MiB") }},
		{"--disk", "BARN_DISK", &f.Disk, func(o *plan.Overrides, v string) (string, error) { return setSize(&o.RootDiskBytes, v, "GiB") }},
	} {
		v, from := *s.value, s.flag
		if v == "" {
			v, from = getenv(s.env), s.env
		}
		if v == "" {
			continue
		}
		if hint, err := s.set(o, v); err != nil {
			e := exitcode.New(exitcode.Usage, "%s %q: %v", from, v, err).WithReason("invalid_override")
			if hint != "" {
				e = e.WithNext(hint)
			}
			return nil, e
		}
		o.Args = append(o.Args, s.flag+"="+v)
	}
	if o.IsZero() {
		return nil, nil
	}
	return o, nil
}

func setImage(o *plan.Overrides, v string) (string, error) {
	img, hint, err := inventory.ImageSelector(v)
	o.Image = img
	return hint, err
}

// setArch reads --arch / BARN_ARCH with spec.ParseArch (any case, aliases).
func setArch(o *plan.Overrides, v string) (string, error) {
	a, viol := spec.ParseArch(v)
	if viol != nil {
		return viol.Hint, viol
	}
	o.Arch = a
	return "", nil
}

func setCPU(o *plan.Overrides, v string) (string, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < spec.MinCPUs || n > spec.MaxCPUs {
		return "write a whole number of vCPUs from " + strconv.Itoa(spec.MinCPUs) + " to " + strconv.Itoa(spec.MaxCPUs), errNotCPUs
	}
	o.CPUs = n
	return "", nil
}

// setSize reads a size as the inventory does: a bare whole number is in
// unit (vm_mem's MiB, vm_disk's GiB), else a number and a unit.
func setSize(dst *int64, v, unit string) (string, error) {
	v = strings.TrimSpace(v)
	if _, err := strconv.ParseUint(v, 10, 63); err == nil {
		v += unit
	}
	b, hint, err := inventory.ParseSize(v)
	if err != nil {
		return hint, err
	}
	*dst = b
	return "", nil
}

var errNotCPUs = errors.New("not a vCPU count")
