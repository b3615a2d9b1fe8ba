package hostpath

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// TestDependencies keeps the plugin a leaf: it may import only the CSI spec,
// gRPC and protobuf, x/sys, hclog and the standard library, so that it stays
// runnable on its own and never pulls Berth's server or client in.
func TestDependencies(t *testing.T) {
	allowed := []string{
		"github.com/container-storage-interface/spec/",
		"google.golang.org/grpc",
		"google.golang.org/protobuf/",
		"golang.org/x/sys/",
		"github.com/hashicorp/go-hclog",
	}
	files, err := filepath.Glob("*.go")
	must.NoError(t, err)
	must.SliceNotEmpty(t, files, must.Sprint("run from the package directory"))
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		must.NoError(t, err)
		for _, imp := range ast.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			must.NoError(t, err)
			first, _, _ := strings.Cut(path, "/")
			if !strings.Contains(first, ".") {
				continue // standard library
			}
			ok := false
			for _, a := range allowed {
				ok = ok || strings.HasPrefix(path, a)
			}
			must.True(t, ok, must.Sprintf("%s imports %s, which the hostpath plugin must not depend on", f, path))
		}
	}
}
