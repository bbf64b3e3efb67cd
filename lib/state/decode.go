package state

import (
	"barn.dev/lib/fileid"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/wire"
)

// Size bounds of persisted documents (bytes).
const (
	MaxDocumentBytes = 16 << 20 // deployment and node state
	MaxJournalBytes  = 1 << 20  // prepare journal and transaction
	MaxHolderBytes   = 1024     // lock holder record
)

// FileMode is the mode of every file Barn writes under the state root.
const FileMode os.FileMode = 0o600

// DirMode is the mode of every directory Barn creates under the state root.
const DirMode os.FileMode = 0o700

// readFileStrict reads a state file without following symlinks. It
// returns (nil, nil) when path does not exist, and an integrity error
// naming path when it is a symlink, not a regular file, not mode 0600, not
// owned by the user, larger than max bytes, or unreadable.
func (r *Root) readFileStrict(path string, max int64) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, integrity(path, "unreadable: %v", unwrapPath(err))
	}
	if err := r.checkFileInfo(path, fi); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil // removed since the Lstat
		}
		return nil, integrity(path, "unreadable: %v", unwrapPath(err))
	}
	defer f.Close()
	fi2, err := f.Stat()
	if err != nil || !os.SameFile(fi, fi2) {
		return nil, integrity(path, "changed while being read")
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, integrity(path, "unreadable: %v", unwrapPath(err))
	}
	if int64(len(data)) > max {
		return nil, integrity(path, "larger than %d bytes", max)
	}
	id, err := fileid.OfFile(f)
	if err != nil {
		return nil, integrity(path, "unreadable: %v", err)
	}
	r.remember(path, id)
	return data, nil
}

// checkFileInfo refuses a symlink, a non-regular file, a mode other than
// 0600 and a foreign owner.
func (r *Root) checkFileInfo(path string, fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return integrity(path, "is a symlink; state files must be regular files")
	case !fi.Mode().IsRegular():
		return integrity(path, "is not a regular file")
	case fi.Mode().Perm() != FileMode:
		return integrity(path, "has mode %04o, want %04o", fi.Mode().Perm(), FileMode).WithNext("chmod 0600 " + path)
	case ownerOf(fi) != r.uid:
		return integrity(path, "is owned by uid %d, not by this user (uid %d)", ownerOf(fi), r.uid)
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// decodeDocument checks data's schema against want and decodes it
// strictly (wire.DecodeStrict: exact member names, no duplicates, no
// unknown fields, no trailing data) into v. Errors are integrity errors
// naming path.
func decodeDocument(path string, data []byte, want string, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return damaged(path, want, "is empty; expected a %s document", want)
	}
	var probe map[string]any
	if err := wire.DecodeStrict(data, &probe); err != nil {
		// Not even one well-formed JSON object: report the decoder's error.
		return damaged(path, want, "invalid %s document: %v", want, err)
	}
	got, _ := probe["schema"].(string)
	if err := checkSchema(got, want); err != nil {
		e := integrity(path, "%s", err.msg)
		if err.newer {
			e = e.WithNext("upgrade Barn; this binary reads " + want)
		}
		return e
	}
	if err := wire.DecodeStrict(data, v); err != nil {
		return damaged(path, want, "invalid %s document: %v", want, err)
	}
	return nil
}

// damaged is integrity for a document of schema want whose bytes are
// damaged (empty, truncated, not its schema). Nothing Barn runs can settle
// it: the evidence it held is gone, and Barn never deletes what it cannot
// prove it owns. The one action is the user's: restore the file, or, for
// the record of an unfinished operation (a prepare journal or a destroy
// transaction), move it aside once checked.
func damaged(path, want, format string, args ...any) *exitcode.Error {
	next := RestoreHint(path)
	if want == JournalSchema || want == TransactionSchema {
		next = "check " + path + " (a damaged record of an unfinished operation) and move it out of " + filepath.Dir(path) + ", then barn-node status"
	}
	return integrity(path, format, args...).WithNext(next)
}

// RestoreHint is the next: hint of a damaged or missing state document:
// restore path (barn-state verify lists every damaged document).
func RestoreHint(path string) string {
	return "restore " + path + " from a backup (barn-state verify lists every damaged document)"
}

type schemaError struct {
	msg   string
	newer bool
}

// checkSchema compares a document's schema with the one this binary
// writes. Same family with a higher version is "newer".
func checkSchema(got, want string) *schemaError {
	if got == want {
		return nil
	}
	if got == "" {
		return &schemaError{msg: "has no schema field (want " + want + ")"}
	}
	gf, gv, gok := splitSchema(got)
	wf, wv, wok := splitSchema(want)
	if gok && wok && gf == wf && gv > wv {
		return &schemaError{msg: fmt.Sprintf("has schema %s, written by a newer Barn; this binary reads %s", got, want), newer: true}
	}
	return &schemaError{msg: fmt.Sprintf("has schema %q, want %s", got, want)}
}

// splitSchema splits "barn.state.node/v2" into ("barn.state.node", 2).
func splitSchema(s string) (string, int, bool) {
	i := strings.LastIndex(s, "/v")
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(s[i+2:])
	if err != nil || n < 1 {
		return "", 0, false
	}
	return s[:i], n, true
}

// encodeDocument is the persisted form: canonical JSON plus "\n".
func encodeDocument(v any) ([]byte, error) {
	b, err := wire.Marshal(v)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "encoding state document")
	}
	return append(b, '\n'), nil
}
