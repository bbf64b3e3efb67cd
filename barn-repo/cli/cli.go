// Package cli is barn-repo's command line, importable so that tests can run the
// tool in process (testscripts registers it as a command).
package cli

import (
	"context"
	"os"
	"path/filepath"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/tool"
)

// Name is the tool's name as printed in errors.
const Name = "barn-repo"

// grammar is the kong command tree.
type grammar struct {

	// Maintainer side: a static repository directory.
	Scan   scanCmd   `cmd:"" help:"Observe a repository directory against repo.yaml (tracked, missing, untracked, unsafe files; no hashing)."`
	Build  buildCmd  `cmd:"" help:"Measure every artifact and atomically write catalog.json."`
	Verify verifyCmd `cmd:"" help:"Rebuild catalog.json in memory and require identical bytes."`
	Keygen keygenCmd `cmd:"" help:"Generate a minisign key pair for signing catalogs."`
	Sign   signCmd   `cmd:"" help:"Write catalog.json.minisig whose trusted comment names the revision."`

	// Client side: trust, catalogs and the image cache.
	Trust   trustCmd   `cmd:"" help:"Manage the minisign keys trusted to sign catalogs."`
	Update  updateCmd  `cmd:"" help:"Fetch, verify and activate the selected repository's signed catalog (never implicit; default: the official repository)."`
	Sync    syncCmd    `cmd:"" aliases:"sy" help:"Activate an exact catalog file (URL or path) for the selected repository."`
	List    listCmd    `cmd:"" aliases:"ls" help:"List the images of the selected repository's active catalog."`
	Info    infoCmd    `cmd:"" aliases:"in" help:"Show the exact image a selector resolves to and whether it is cached."`
	Resolve resolveCmd `cmd:"" help:"Resolve one selector, or every node of a barn.spec/v1 read on stdin, to exact images."`
	Pull    pullCmd    `cmd:"" aliases:"p" help:"Download and verify an image into the cache."`
	Import  importCmd  `cmd:"" aliases:"i" help:"Copy a local qcow2 into the cache (images/local), optionally under a local-NAME selector."`
	Prune   pruneCmd   `cmd:"" aliases:"pr" help:"Remove cached images that no active catalog, applied node or import protects."`
	Purge   purgeCmd   `cmd:"" help:"Remove the whole image cache: cached and imported images, catalog records and trusted keys (refused while a deployment is applied; for uninstall)."`
	Reset   resetCmd   `cmd:"" help:"Return the selected repository to its built-in catalog (the embedded one for the official repository, none otherwise); keeps its anti-rollback and signer record."`
	tool.Globals
}

// Main runs barn-repo with args (without the program name) and returns the exit
// status.
func Main(ctx context.Context, args []string, stdio tool.Stdio, getenv func(string) string) int {
	return tool.Main(ctx, Name, "Publish image repositories and keep the verified image cache.", args, stdio, getenv, &grammar{})
}

// rootFlag is the --root of the maintainer commands.
type rootFlag struct {
	Root string `name:"root" placeholder:"DIR" help:"Repository root (default: the current directory)."`
}

// dir returns the absolute, cleaned repository root.
func (r rootFlag) dir() (string, error) {
	d := r.Root
	if d == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", exitcode.Wrap(exitcode.Runtime, err, "finding the current directory")
		}
		d = wd
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		return "", exitcode.Wrap(exitcode.Usage, err, "--root %s", d)
	}
	return abs, nil
}
