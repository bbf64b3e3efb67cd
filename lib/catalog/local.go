package catalog

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
	"barn.dev/lib/wire"
)

// LocalSchema is the schema of images/local-images.json.
const LocalSchema = "barn.images.local/v1"

// LocalImage is one imported image. Release is "local-<sha256[:12]>"; a
// named import also has Name ("local-…"), Boot and SourceUser and can be
// used as a selector.
type LocalImage struct {
	File        string `json:"file"` // "local/<basename>"
	SHA256      string `json:"sha256"`
	SizeBytes   int64  `json:"size_bytes"`
	VirtualSize int64  `json:"virtual_size"`
	Release     string `json:"release"`
	Name        string `json:"name,omitempty"`
	Boot        string `json:"boot,omitempty"`
	SourceUser  string `json:"source_user,omitempty"`
	Arch        string `json:"arch"`
}

// LocalRegistry is images/local-images.json.
type LocalRegistry struct {
	Schema string                `json:"schema"`
	Images map[string]LocalImage `json:"images"` // by basename
}

// ReadLocal reads the import registry; missing is empty, damaged is integrity.
func ReadLocal(imagesDir string) (*LocalRegistry, error) {
	p := filepath.Join(imagesDir, "local-images.json")
	data, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return &LocalRegistry{Schema: LocalSchema, Images: map[string]LocalImage{}}, nil
	}
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", p)
	}
	reg := &LocalRegistry{}
	if err := wire.DecodeStrict(data, reg); err != nil || reg.Schema != LocalSchema {
		if err == nil {
			err = fmt.Errorf("schema %q, want %q", reg.Schema, LocalSchema)
		}
		return nil, exitcode.New(exitcode.Integrity, "%s is damaged: %v", p, err).WithReason("damaged_registry")
	}
	if reg.Images == nil {
		reg.Images = map[string]LocalImage{}
	}
	return reg, nil
}

// Identity returns the exact identity of an imported image.
func (l LocalImage) Identity(selector string) imageref.Identity {
	name := l.Name
	if name == "" {
		name = "local"
	}
	return imageref.Identity{Selector: selector, Image: name, Version: l.Release, Arch: l.Arch, File: l.File,
		SizeBytes: l.SizeBytes, SHA256: l.SHA256, VirtualSize: l.VirtualSize, Boot: l.Boot, SourceUser: l.SourceUser, Status: "unknown"}
}

// Lookup returns the named import whose Name is name.
func (r *LocalRegistry) Lookup(name string) (LocalImage, bool) {
	for _, k := range sortedNames(r.Images) {
		if r.Images[k].Name == name {
			return r.Images[k], true
		}
	}
	return LocalImage{}, false
}

func sortedNames(m map[string]LocalImage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
