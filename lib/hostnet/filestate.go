package hostnet

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// FileState is a file's recorded state: existence, owner, mode (octal text,
// including setuid bits, e.g. "4755") and content digest.
type FileState struct {
	Path    string `json:"path"`
	Exists  bool   `json:"exists"`
	Dir     bool   `json:"dir,omitempty"`
	Symlink bool   `json:"symlink,omitempty"`
	Mode    string `json:"mode,omitempty"`
	UID     int    `json:"uid"`
	GID     int    `json:"gid"`
	SHA256  string `json:"sha256,omitempty"`
	// Content is the original bytes of small text files Barn may rewrite
	// (bridge.conf), so uninstall can restore them exactly.
	Content string `json:"content,omitempty"`
}

// StatFile records path's state; withContent keeps the bytes (≤ 64 KiB).
func StatFile(path string, withContent bool) (FileState, error) {
	fs0 := FileState{Path: path}
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fs0, nil
	}
	if err != nil {
		return fs0, err
	}
	fs0.Exists = true
	fs0.Symlink = fi.Mode()&fs.ModeSymlink != 0
	fs0.Dir = fi.IsDir()
	fs0.Mode = ModeString(fi.Mode())
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		fs0.UID, fs0.GID = int(st.Uid), int(st.Gid)
	}
	if fi.Mode().IsRegular() {
		b, err := os.ReadFile(path)
		if err != nil {
			return fs0, err
		}
		sum := sha256.Sum256(b)
		fs0.SHA256 = hex.EncodeToString(sum[:])
		if withContent {
			if len(b) > 64<<10 {
				return fs0, fmt.Errorf("%s: larger than 64 KiB; refusing to manage it", path)
			}
			fs0.Content = string(b)
		}
	}
	return fs0, nil
}

// ModeString renders permission and setuid/setgid/sticky bits as octal ("4755").
func ModeString(m fs.FileMode) string {
	return fmt.Sprintf("%04o", unixMode(m))
}

func unixMode(m fs.FileMode) uint32 {
	v := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return v
}

func parseMode(s string) (uint32, error) {
	var v uint32
	if _, err := fmt.Sscanf(s, "%o", &v); err != nil {
		return 0, fmt.Errorf("mode %q: %v", s, err)
	}
	return v, nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
