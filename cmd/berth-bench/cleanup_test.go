package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

func TestInside(t *testing.T) {
	cases := []struct {
		name, path, dir string
		want            bool
	}{
		{name: "the dir itself", path: "/tmp/bb", dir: "/tmp/bb", want: true},
		{name: "below it", path: "/tmp/bb/data", dir: "/tmp/bb", want: true},
		{name: "a sibling with the same prefix", path: "/tmp/bbother", dir: "/tmp/bb", want: false},
		{name: "above it", path: "/tmp", dir: "/tmp/bb", want: false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			must.Eq(t, c.want, inside(c.path, c.dir))
		})
	}
}

func TestMountPointsUnder(t *testing.T) {
	mi := filepath.Join(t.TempDir(), "mountinfo")
	must.NoError(t, os.WriteFile(mi, []byte(
		"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"+
			"40 22 8:1 /x /tmp/bb/data/client/csi/hostpath/staging/default/v/rw rw shared:1 - ext4 /dev/vda rw\n"+
			"41 40 8:1 /x /tmp/bb/data/client/csi/hostpath/per-alloc/a/v/rw rw shared:1 - ext4 /dev/vda rw\n"+
			"42 22 8:1 /y /tmp/bb/mount\\040floor/dst rw shared:1 - ext4 /dev/vda rw\n"+
			"43 22 8:1 /y /tmp/bbother/dst rw shared:1 - ext4 /dev/vda rw\n"+
			"44 22 8:1 /y /tmp/bb rw shared:1 - ext4 /dev/vda rw\n"+
			"45 22 8:1 /y /tmp/bb rw shared:1 - ext4 /dev/vda rw\n"+
			"short line\n"), 0o600))
	got, err := mountPointsUnder(mi, "/tmp/bb")
	must.NoError(t, err)
	must.Eq(t, []string{
		"/tmp/bb/data/client/csi/hostpath/staging/default/v/rw",
		"/tmp/bb/data/client/csi/hostpath/per-alloc/a/v/rw",
		"/tmp/bb/mount floor/dst",
		"/tmp/bb",
	}, got)
}

func TestUnescapeMountPath(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{name: "plain", in: "/a/b", want: "/a/b"},
		{name: "space", in: `/a\040b`, want: "/a b"},
		{name: "backslash", in: `/a\134b`, want: `/a\b`},
		{name: "truncated escape is kept", in: `/a\04`, want: `/a\04`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			must.Eq(t, c.want, unescapeMountPath(c.in))
		})
	}
}
