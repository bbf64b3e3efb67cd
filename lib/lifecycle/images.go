package lifecycle

import (
	"context"
	"io"

	"barn.dev/lib/imagecache"
	"barn.dev/lib/imageref"
	"barn.dev/lib/state"
)

// ensureImage returns the verified cached file of id (imagecache.Ensure:
// re-verified size, SHA-256 and qcow2 header, or pulled from the active
// catalog's repository; integrity error on any mismatch, no fallback).
func ensureImage(ctx context.Context, root *state.Root, id imageref.Identity, progress io.Writer) (string, error) {
	return imagecache.Ensure(ctx, root, id, progress)
}
