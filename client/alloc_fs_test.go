package client

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"
)

// TestAllocFS_Confined: paths resolve inside the alloc dir only: ".." is
// refused, symlinks inside are followed, symlinks out (absolute or
// relative) are refused rather than followed.
func TestAllocFS_Confined(t *testing.T) {
	outside := t.TempDir()
	must.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o644))
	dir := filepath.Join(t.TempDir(), "alloc-1")
	must.NoError(t, os.MkdirAll(filepath.Join(dir, "web", "local"), 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(dir, "web", "local", "f"), []byte("inside"), 0o644))
	must.NoError(t, os.Symlink("f", filepath.Join(dir, "web", "local", "in")))
	must.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "web", "local", "abs-out")))
	must.NoError(t, os.Symlink("../../../"+filepath.Base(outside)+"/secret", filepath.Join(dir, "web", "local", "rel-out")))

	read := func(p string) (string, error) {
		rel, err := cleanAllocPath(p)
		if err != nil {
			return "", err
		}
		f, err := openInAllocDir(dir, rel, unix.O_RDONLY)
		if err != nil {
			return "", err
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		return string(b), err
	}
	cases := []struct {
		name, path, want string
		err              error
	}{
		{"file", "/web/local/f", "inside", nil},
		{"without leading slash", "web/local/f", "inside", nil},
		{"symlink inside", "/web/local/in", "inside", nil},
		{"dot dot", "/web/../../" + filepath.Base(outside) + "/secret", "", ErrPathEscapes},
		{"absolute symlink out", "/web/local/abs-out", "", ErrPathEscapes},
		{"relative symlink out", "/web/local/rel-out", "", ErrPathEscapes},
		{"missing", "/web/local/nope", "", fs.ErrNotExist},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := read(tc.path)
			if tc.err != nil {
				must.True(t, errors.Is(err, tc.err), must.Sprintf("got %v, want %v", err, tc.err))
				must.NotEq(t, "host secret", got)
				return
			}
			must.NoError(t, err)
			must.Eq(t, tc.want, got)
		})
	}
}
