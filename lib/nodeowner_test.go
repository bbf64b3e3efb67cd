package lib_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// nodeFileCalls are the calls that create, write, move, identify or delete
// files: under the state root's nodes/<node>/ and disks/<node>/ only
// lib/nodedir makes them (issue 19), so lifecycle, the orchestrator,
// makes none of them itself.
var nodeFileCalls = map[string][]string{
	"os":       {"Remove", "RemoveAll", "Rename", "OpenFile", "Create", "WriteFile", "Mkdir", "MkdirAll", "Chmod", "Link", "Symlink", "Truncate", "Lstat", "Stat", "ReadDir", "Open"},
	"syscall":  nil, // every call
	"unix":     nil,
	"safefile": nil,
	"fileid":   nil,
	"disk":     {"Preserve", "Reattach", "Return", "Release", "DeleteRetained", "DeleteAll", "ReadRetained", "Lent", "List"},
}

// Root methods that write or remove a node's documents or directories.
var nodeRootWrites = []string{"WriteNode", "RemoveNode", "WriteJournal", "RemoveJournal", "WriteTransaction", "RemoveTransaction",
	"EnsureNodeDir", "EnsureRetainedDiskDir", "RetainedDiskDir"}

func TestLifecycleLeavesNodeFilesToNodedir(t *testing.T) {
	files, err := filepath.Glob("lifecycle/*.go")
	if err != nil || len(files) < 5 {
		t.Fatalf("lifecycle sources: %v, %v", files, err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok {
				if names, listed := nodeFileCalls[pkg.Name]; listed && (names == nil || contains(names, sel.Sel.Name)) {
					t.Errorf("%s: lifecycle calls %s.%s; node files are lib/nodedir's", fset.Position(call.Pos()), pkg.Name, sel.Sel.Name)
				}
			}
			if root, ok := sel.X.(*ast.SelectorExpr); ok && root.Sel.Name == "Root" && contains(nodeRootWrites, sel.Sel.Name) {
				t.Errorf("%s: lifecycle calls Root.%s; node documents are lib/nodedir's", fset.Position(call.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
