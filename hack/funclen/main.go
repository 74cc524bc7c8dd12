// Command funclen lists the hand-written Go functions longer than a limit
// (STYLE.md: a function that no longer fits a screen is several named
// steps). It reads the non-test .go files under the directories given
// (with -tests, the _test.go files too),
// skips generated files and pkg/autoscaler (the upstream-mirrored core),
// counts each function from its "func" line to its closing brace, and
// exits 1 when any is longer than -max lines.
//
//	go run ./hack/funclen -max 80 cmd pkg internal test hack
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// skipped are the trees that are not hand-written here.
var skipped = []string{"hack/tools", "pkg/autoscaler"}

type long struct {
	file  string
	line  int
	name  string
	lines int
}

func main() {
	max := flag.Int("max", 80, "longest allowed function, in lines")
	tests := flag.Bool("tests", false, "also read the _test.go files")
	flag.Parse()
	roots := flag.Args()
	if len(roots) == 0 {
		roots = []string{"."}
	}
	var found []long
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if isSkipped(path) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || (!*tests && strings.HasSuffix(path, "_test.go")) {
				return nil
			}
			ls, err := longFuncs(path, *max)
			found = append(found, ls...)
			return err
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "funclen:", err)
			os.Exit(2)
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].lines > found[j].lines })
	for _, l := range found {
		fmt.Printf("%s:%d: %s is %d lines (at most %d)\n", l.file, l.line, l.name, l.lines, *max)
	}
	if len(found) > 0 {
		os.Exit(1)
	}
}

func isSkipped(dir string) bool {
	dir = filepath.ToSlash(filepath.Clean(dir))
	for _, s := range skipped {
		if dir == s || strings.HasSuffix(dir, "/"+s) {
			return true
		}
	}
	return false
}

// longFuncs parses one file and returns its functions longer than max lines.
func longFuncs(path string, max int) ([]long, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	if ast.IsGenerated(f) {
		return nil, nil
	}
	var out []long
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		start := fset.Position(fn.Pos()).Line
		n := fset.Position(fn.End()).Line - start + 1
		if n > max {
			out = append(out, long{file: path, line: start, name: funcName(fn), lines: n})
		}
	}
	return out, nil
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch r := t.(type) {
	case *ast.Ident:
		return r.Name + "." + fn.Name.Name
	case *ast.IndexExpr:
		if id, ok := r.X.(*ast.Ident); ok {
			return id.Name + "." + fn.Name.Name
		}
	case *ast.IndexListExpr:
		if id, ok := r.X.(*ast.Ident); ok {
			return id.Name + "." + fn.Name.Name
		}
	}
	return fn.Name.Name
}
