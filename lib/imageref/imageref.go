// Package imageref holds the exact image identity a selector resolves to,
// and the Resolver interface through which barn-plan and barn-node reach
// the active catalog (implemented by the catalog package).
//
// A selector is what an inventory asks for ("d12", "d12:stable",
// "d12@12.13"); an Identity is what the catalog proves: the tuple
// (image, version, arch) plus the exact file, byte count and digest.
package imageref

import "errors"

// Identity is one exact catalog artifact.
type Identity struct {
	Selector    string `json:"selector"`     // the selector it was resolved from
	Image       string `json:"image"`        // family, e.g. "d12"
	Version     string `json:"version"`      // exact version key
	Arch        string `json:"arch"`         // amd64 or arm64
	File        string `json:"file"`         // repository-relative, e.g. "images/d12-12.13-amd64.qcow2"
	SizeBytes   int64  `json:"size_bytes"`   // artifact byte count
	SHA256      string `json:"sha256"`       // hex digest of the artifact bytes
	VirtualSize int64  `json:"virtual_size"` // qcow2 virtual size, bytes
	Boot        string `json:"boot"`         // bios or uefi
	SourceUser  string `json:"source_user"`  // the image's own default user
	Status      string `json:"status"`       // supported, testing, deprecated or unknown
}

// ErrNoCatalog is returned by a Resolver when no catalog is active; callers
// that can work without exact images (barn-plan) turn it into a warning.
var ErrNoCatalog = errors.New("no image catalog is active")

// Resolver resolves a canonical selector for an architecture ("amd64" or
// "arm64"; callers resolve "native" first) to an exact Identity. Unknown
// selectors are usage errors (exitcode.Usage, reason "unknown_image").
type Resolver interface {
	Resolve(selector, arch string) (Identity, error)
}
