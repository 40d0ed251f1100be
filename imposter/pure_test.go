package imposter

import (
	"go/ast"
	goparser "go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// The engine stays below HTTP and outside the world: the simulator drives
// it with requests it makes itself, so no file of it (tests aside) may
// import the network, the OS, or read the wall clock.
func TestEngineIsPure(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	forbidden := map[string]bool{"net": true, "net/http": true, "os": true, "os/exec": true, "crypto/rand": true, "math/rand": true, "math/rand/v2": true, "sync": true}
	checked := 0
	for _, name := range files {
		if filepath.Ext(name) != ".go" || len(name) > 8 && name[len(name)-8:] == "_test.go" {
			continue
		}
		f, err := goparser.ParseFile(token.NewFileSet(), name, nil, 0)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			require.False(t, forbidden[path], "%s imports %s", name, path)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" && (sel.Sel.Name == "Now" || sel.Sel.Name == "Since" || sel.Sel.Name == "Sleep") {
					t.Errorf("%s reads the wall clock (time.%s)", name, sel.Sel.Name)
				}
			}
			if _, ok := n.(*ast.GoStmt); ok {
				t.Errorf("%s starts a goroutine", name)
			}
			return true
		})
		checked++
	}
	require.GreaterOrEqual(t, checked, 6, "the engine's files were found")
}
