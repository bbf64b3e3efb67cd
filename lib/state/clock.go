package state

import (
	"errors"
	"io/fs"
	"time"
)

// now is the root's clock in UTC, without a monotonic reading.
func (r *Root) now() time.Time {
	if r.Now == nil {
		return time.Now().UTC()
	}
	return r.Now().UTC()
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
