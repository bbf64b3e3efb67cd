package exitcode

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// site is one place in the source that emits a reason.
type site struct {
	pos   string // file:line
	class string // the class of the exitcode.New/Wrap the reason is set on, when visible
}

// scan collects every reason the non-test Go source under root emits, and
// the reason expressions it cannot resolve to a literal. A reason is
// emitted by:
//   - X.WithReason(arg) and exitcode.Error{Reason: arg};
//   - an argument passed for a parameter named reason (of a function, a
//     method or a func literal bound to a name);
//   - a value assigned to a variable named reason;
//   - the field reason of a table (a slice of anonymous structs), and a
//     value keyed reason in any struct literal;
//   - a string returned by a function whose name ends in "Reason".
//
// arg resolves when it is a string literal, a string constant, or a
// variable or field named reason (whose values the other rules collect);
// anything else is unresolved and must be rewritten into one of these forms.
func scan(t *testing.T, root string) (map[string][]site, []string) {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s := &scanner{fset: fset, root: root, consts: map[string]string{}, params: map[string]int{},
		returners: map[string]bool{}, found: map[string][]site{}}
	for _, f := range files {
		s.enter(f)
		s.collectDecls(f)
	}
	for _, f := range files {
		s.enter(f)
		ast.Inspect(f, s.visit)
	}
	return s.found, s.unresolved
}

type scanner struct {
	fset       *token.FileSet
	root       string
	consts     map[string]string // constant name → string value (names are unique enough)
	params     map[string]int    // scope+function name → index of its reason parameter
	returners  map[string]bool   // scope+function name of functions returning a reason
	dir, file  string            // the scope of the file being read
	found      map[string][]site
	unresolved []string
}

// enter sets the scope of names to f's package (its directory) and file.
func (s *scanner) enter(f *ast.File) {
	s.file = s.fset.Position(f.Pos()).Filename
	s.dir = filepath.Dir(s.file)
}

// pkgKey and fileKey scope a function name to the package or the file
// (a func literal bound to a name).
func (s *scanner) pkgKey(name string) string  { return s.dir + "\x00" + name }
func (s *scanner) fileKey(name string) string { return s.file + "\x00" + name }

// param returns the index of the reason parameter of the function called
// name here.
func (s *scanner) param(name string) (int, bool) {
	if i, ok := s.params[s.fileKey(name)]; ok {
		return i, true
	}
	i, ok := s.params[s.pkgKey(name)]
	return i, ok
}

func (s *scanner) where(p token.Pos) string {
	pos := s.fset.Position(p)
	rel, _ := filepath.Rel(s.root, pos.Filename)
	return fmt.Sprintf("%s:%d", rel, pos.Line)
}

// collectDecls records string constants and the functions with a reason
// parameter.
func (s *scanner) collectDecls(f *ast.File) {
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GenDecl:
			if n.Tok != token.CONST {
				return true
			}
			for _, spec := range n.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if v, ok := literal(vs.Values[i]); ok {
							s.consts[name.Name] = v
						}
					}
				}
			}
		case *ast.FuncDecl:
			s.reasonParam(s.pkgKey(n.Name.Name), n.Type)
			if n.Body != nil && returnsReason(n) {
				s.returners[s.pkgKey(n.Name.Name)] = true
			}
		case *ast.AssignStmt:
			for i, rhs := range n.Rhs {
				if fl, ok := rhs.(*ast.FuncLit); ok && i < len(n.Lhs) {
					if id, ok := n.Lhs[i].(*ast.Ident); ok {
						s.reasonParam(s.fileKey(id.Name), fl.Type)
					}
				}
			}
		}
		return true
	})
}

// returnsReason reports whether fn returns one string that is a reason:
// its name ends in "Reason", or it returns a field named reason.
func returnsReason(fn *ast.FuncDecl) bool {
	res := fn.Type.Results
	if res == nil || len(res.List) != 1 || fmt.Sprint(res.List[0].Type) != "string" {
		return false
	}
	if strings.HasSuffix(fn.Name.Name, "Reason") {
		return true
	}
	found := false
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if r, ok := n.(*ast.ReturnStmt); ok && len(r.Results) == 1 {
			if sel, ok := r.Results[0].(*ast.SelectorExpr); ok && sel.Sel.Name == "reason" {
				found = true
			}
		}
		return true
	})
	return found
}

func (s *scanner) reasonParam(key string, ft *ast.FuncType) {
	i := 0
	for _, field := range ft.Params.List {
		for _, name := range field.Names {
			if name.Name == "reason" && !strings.HasSuffix(key, "\x00WithReason") {
				s.params[key] = i
			}
			i++
		}
	}
}

func literal(e ast.Expr) (string, bool) {
	if bl, ok := e.(*ast.BasicLit); ok && bl.Kind == token.STRING {
		v, err := strconv.Unquote(bl.Value)
		return v, err == nil
	}
	return "", false
}

func (s *scanner) visit(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.CallExpr:
		s.call(n)
	case *ast.CompositeLit:
		s.composite(n)
	case *ast.AssignStmt:
		for i, lhs := range n.Lhs {
			if id, ok := lhs.(*ast.Ident); ok && id.Name == "reason" && len(n.Rhs) == len(n.Lhs) {
				s.emit(n.Rhs[i], "")
			}
		}
	case *ast.FuncDecl:
		if s.returners[s.pkgKey(n.Name.Name)] {
			ast.Inspect(n.Body, func(m ast.Node) bool {
				if r, ok := m.(*ast.ReturnStmt); ok && len(r.Results) == 1 {
					s.emit(r.Results[0], "")
				}
				return true
			})
		}
	}
	return true
}

func (s *scanner) call(c *ast.CallExpr) {
	name := ""
	switch fn := c.Fun.(type) {
	case *ast.Ident:
		name = fn.Name
	case *ast.SelectorExpr:
		name = fn.Sel.Name
	}
	if name == "WithReason" && len(c.Args) == 1 {
		s.emit(c.Args[0], classOf(c.Fun.(*ast.SelectorExpr).X))
		return
	}
	if i, ok := s.param(name); ok && i < len(c.Args) {
		s.emit(c.Args[i], "")
	}
}

// composite handles exitcode.Error{Reason: ...}, {reason: ...} in any
// struct literal, and tables of anonymous structs with a reason field.
func (s *scanner) composite(cl *ast.CompositeLit) {
	if sel, ok := cl.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Error" && fmt.Sprint(sel.X) == "exitcode" {
		class := ""
		for _, el := range cl.Elts {
			if kv, ok := el.(*ast.KeyValueExpr); ok && fmt.Sprint(kv.Key) == "Class" {
				class = className(kv.Value)
			}
		}
		for _, el := range cl.Elts {
			if kv, ok := el.(*ast.KeyValueExpr); ok && fmt.Sprint(kv.Key) == "Reason" {
				s.emit(kv.Value, class)
			}
		}
		return
	}
	for _, el := range cl.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok && fmt.Sprint(kv.Key) == "reason" {
			s.emit(kv.Value, "")
		}
	}
	at, ok := cl.Type.(*ast.ArrayType)
	if !ok {
		return
	}
	st, ok := at.Elt.(*ast.StructType)
	if !ok {
		return
	}
	idx, i := -1, 0
	for _, f := range st.Fields.List {
		for _, n := range f.Names {
			if n.Name == "reason" {
				idx = i
			}
			i++
		}
	}
	if idx < 0 {
		return
	}
	for _, el := range cl.Elts {
		if row, ok := el.(*ast.CompositeLit); ok && idx < len(row.Elts) {
			s.emit(row.Elts[idx], "")
		}
	}
}

// emit records the reason e, or e as unresolved.
func (s *scanner) emit(e ast.Expr, class string) {
	switch e := e.(type) {
	case *ast.Ident:
		if e.Name == "reason" {
			return // a variable or parameter: its values are collected where they are set
		}
		if v, ok := s.consts[e.Name]; ok {
			s.add(v, e.Pos(), class)
			return
		}
	case *ast.SelectorExpr:
		if e.Sel.Name == "reason" || e.Sel.Name == "Reason" {
			return // a table's field, or a reason passed on from another error
		}
		if v, ok := s.consts[e.Sel.Name]; ok {
			s.add(v, e.Pos(), class)
			return
		}
	case *ast.CallExpr:
		switch fn := e.Fun.(type) {
		case *ast.Ident:
			if s.returners[s.pkgKey(fn.Name)] {
				return // its returns are collected
			}
		case *ast.SelectorExpr:
			for k := range s.returners {
				if strings.HasSuffix(k, "\x00"+fn.Sel.Name) {
					return // a function of another package returning reasons
				}
			}
		}
	}
	if v, ok := literal(e); ok {
		s.add(v, e.Pos(), class)
		return
	}
	s.unresolved = append(s.unresolved, s.where(e.Pos()))
}

func (s *scanner) add(reason string, p token.Pos, class string) {
	if reason == "" {
		return
	}
	s.found[reason] = append(s.found[reason], site{pos: s.where(p), class: class})
}

// classOf returns the class of the exitcode.New/Wrap at the root of a
// method chain such as exitcode.New(exitcode.Usage, ...).WithNext(...).
func classOf(e ast.Expr) string {
	for {
		c, ok := e.(*ast.CallExpr)
		if !ok {
			return ""
		}
		sel, ok := c.Fun.(*ast.SelectorExpr)
		if !ok {
			return ""
		}
		if (sel.Sel.Name == "New" || sel.Sel.Name == "Wrap") && fmt.Sprint(sel.X) == "exitcode" && len(c.Args) > 0 {
			return className(c.Args[0])
		}
		e = sel.X
	}
}

func className(e ast.Expr) string {
	if sel, ok := e.(*ast.SelectorExpr); ok && fmt.Sprint(sel.X) == "exitcode" {
		return strings.ToLower(sel.Sel.Name)
	}
	return ""
}

// repoRoot is the directory holding go.work above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for ; dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
	}
	t.Fatal("no go.work above the package directory")
	return ""
}
