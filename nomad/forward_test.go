package nomad

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/auth"
	"github.com/berth-io/berth/nomad/structs"
)

// A forwarded call whose connection to the leader breaks answers with a
// code clients retry, not CodeInternal (final for a client's claim); the
// leader's own coded errors reach the caller unchanged.
func TestForwardError(t *testing.T) {
	must.NoError(t, forwardError("CSIVolume.Claim", "127.0.0.1:4647", nil))

	transport := fmt.Errorf("rpc CSIVolume.Claim to 127.0.0.1:4647: %w", io.ErrUnexpectedEOF)
	must.Eq(t, structs.CodeInternal, structs.CodeOf(structs.DecodeWireError(structs.WireError(transport))),
		must.Sprint("unmapped, a transport failure crosses the wire as internal"))
	got := structs.DecodeWireError(structs.WireError(forwardError("CSIVolume.Claim", "127.0.0.1:4647", transport)))
	must.Eq(t, structs.CodeNoLeader, structs.CodeOf(got))
	must.StrContains(t, got.Error(), "forwarding CSIVolume.Claim to the leader at 127.0.0.1:4647 failed")
	must.StrContains(t, got.Error(), "unexpected EOF")

	coded := structs.NewError(structs.CodeInvalid, "volume %q: bad access mode", "db")
	must.True(t, errors.Is(forwardError("CSIVolume.Claim", "x", coded), coded))
}

// Every endpoint the table marks Forward calls forward with its own
// method name. A follower defers a refusal of such a call to the leader
// (authorizeArriving), and only forward sends it there or authorizes it
// again: an endpoint that skipped it would run a refused call.
func TestForward_EveryForwardedEndpointCallsForward(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	must.NoError(t, err)
	methodConsts := map[string]string{} // structs.MethodX -> "A.B"
	structsFile, err := parser.ParseFile(fset, filepath.Join("structs", "endpoints.go"), nil, 0)
	must.NoError(t, err)
	ast.Inspect(structsFile, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Values) == len(vs.Names) {
			for i, name := range vs.Names {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					methodConsts[name.Name], _ = strconv.Unquote(lit.Value)
				}
			}
		}
		return true
	})
	forwards := map[string][]string{} // receiver type.method -> methods passed to forward
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		must.NoError(t, err)
		for _, d := range file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || fd.Body == nil {
				continue
			}
			star, ok := fd.Recv.List[0].Type.(*ast.StarExpr)
			if !ok {
				continue
			}
			recv, ok := star.X.(*ast.Ident)
			if !ok {
				continue
			}
			key := recv.Name + "." + fd.Name.Name
			forwards[key] = []string{}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "forward" {
					return true
				}
				switch a := call.Args[0].(type) {
				case *ast.BasicLit:
					m, _ := strconv.Unquote(a.Value)
					forwards[key] = append(forwards[key], m)
				case *ast.SelectorExpr:
					forwards[key] = append(forwards[key], methodConsts[a.Sel.Name])
				default:
					forwards[key] = append(forwards[key], "?")
				}
				return true
			})
		}
	}
	checked := 0
	for name, ep := range (&Server{}).endpoints() {
		typ := reflect.TypeOf(ep).Elem().Name()
		for _, m := range exportedRPCMethods(ep) {
			method := name + "." + m
			e := auth.Lookup(method)
			if e == nil || !e.Forward {
				continue
			}
			got, ok := forwards[typ+"."+m]
			must.True(t, ok, must.Sprintf("no source found for %s (%s.%s)", method, typ, m))
			must.Eq(t, []string{method}, got, must.Sprintf("%s must call forward once, with its own name", method))
			checked++
		}
	}
	must.Greater(t, 40, checked)
}

// A call a leader answered with CodeNoLeader is sent again until it gets
// another answer, for up to the hold; any other answer, or a call served
// here, returns at once.
func TestHoldWhileNoLeader(t *testing.T) {
	noLeader := structs.NewError(structs.CodeNoLeader, "raft apply: node is not the leader")
	answers := func(errs ...error) (func() (bool, error), *int) {
		n := new(int)
		return func() (bool, error) {
			err := errs[min(*n, len(errs)-1)]
			*n++
			return true, err
		}, n
	}
	cases := []struct {
		name      string
		errs      []error
		wantCode  structs.ErrorCode
		wantCalls int
	}{
		{"a leader appears", []error{noLeader, noLeader, nil}, "", 3},
		{"another error is final", []error{structs.NewError(structs.CodeInvalid, "bad"), nil}, structs.CodeInvalid, 1},
		{"answered at once", []error{nil}, "", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				try, calls := answers(tc.errs...)
				done, err := holdWhileNoLeader(t.Context(), 5*time.Second, try)
				must.True(t, done)
				if tc.wantCode == "" {
					must.NoError(t, err)
				} else {
					must.Eq(t, tc.wantCode, structs.CodeOf(err))
				}
				must.Eq(t, tc.wantCalls, *calls)
			})
		})
	}
	t.Run("the hold runs out", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			try, calls := answers(noLeader)
			start := time.Now()
			_, err := holdWhileNoLeader(t.Context(), 5*time.Second, try)
			must.Eq(t, structs.CodeNoLeader, structs.CodeOf(err))
			must.Between(t, 5*time.Second, time.Since(start), 5*time.Second+2*forwardRetryPause)
			must.Greater(t, 5*time.Second/(2*forwardRetryPause), time.Duration(*calls))
		})
	})
	t.Run("served here", func(t *testing.T) {
		try := func() (bool, error) { return false, nil }
		done, err := holdWhileNoLeader(t.Context(), 5*time.Second, try)
		must.False(t, done)
		must.NoError(t, err)
	})
}
