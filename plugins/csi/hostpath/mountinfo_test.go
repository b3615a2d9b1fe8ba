package hostpath

import (
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

func TestParseMountInfoLine(t *testing.T) {
	cases := []struct {
		name    string
		line    string
		want    mountInfo
		wantErr bool
	}{
		{
			name: "proc(5) example",
			line: `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`,
			want: mountInfo{ID: 36, ParentID: 35, Major: 98, Minor: 0, Root: "/mnt1", MountPoint: "/mnt2",
				Options: "rw,noatime", Optional: []string{"master:1"}, FSType: "ext3", Source: "/dev/root", SuperOpts: "rw,errors=continue"},
		},
		{
			name: "no optional fields",
			line: `27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard`,
			want: mountInfo{ID: 27, ParentID: 1, Major: 254, Minor: 0, Root: "/", MountPoint: "/",
				Options: "rw,relatime", FSType: "ext4", Source: "/dev/vda", SuperOpts: "rw,discard"},
		},
		{
			name: "several optional fields",
			line: `100 27 254:0 /vols/a /mnt/x ro,relatime shared:5 master:3 propagate_from:2 - ext4 /dev/vda rw`,
			want: mountInfo{ID: 100, ParentID: 27, Major: 254, Minor: 0, Root: "/vols/a", MountPoint: "/mnt/x",
				Options: "ro,relatime", Optional: []string{"shared:5", "master:3", "propagate_from:2"}, FSType: "ext4", Source: "/dev/vda", SuperOpts: "rw"},
		},
		{
			name: "escaped space, tab, newline and backslash",
			line: `101 27 0:45 /a\040b /mnt/c\011d\012e\134f rw - tmpfs my\040tmpfs rw`,
			want: mountInfo{ID: 101, ParentID: 27, Major: 0, Minor: 45, Root: "/a b", MountPoint: "/mnt/c\td\ne\\f",
				Options: "rw", FSType: "tmpfs", Source: "my tmpfs", SuperOpts: "rw"},
		},
		{
			name: "no super options",
			line: `102 27 0:46 / /x rw - none none`,
			want: mountInfo{ID: 102, ParentID: 27, Major: 0, Minor: 46, Root: "/", MountPoint: "/x", Options: "rw", FSType: "none", Source: "none"},
		},
		{name: "no separator", line: `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 ext3 /dev/root rw`, wantErr: true},
		{name: "too short", line: `36 35 98:0 /`, wantErr: true},
		{name: "bad id", line: `x 35 98:0 / / rw - ext3 /dev/root rw`, wantErr: true},
		{name: "bad device", line: `36 35 98 / / rw - ext3 /dev/root rw`, wantErr: true},
		{name: "nothing after separator", line: `36 35 98:0 / / rw -`, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMountInfoLine(tc.line)
			if tc.wantErr {
				must.Error(t, err)
				return
			}
			must.NoError(t, err)
			must.Eq(t, tc.want, got)
		})
	}
}

func TestParseMountInfo(t *testing.T) {
	ms, err := parseMountInfo(strings.NewReader("27 1 254:0 / / rw - ext4 /dev/vda rw\n\n28 27 0:5 / /proc rw - proc proc rw\n"))
	must.NoError(t, err)
	must.SliceLen(t, 2, ms)
	must.EqOp(t, "/proc", ms[1].MountPoint)

	_, err = parseMountInfo(strings.NewReader("27 1 254:0 / / rw - ext4 /dev/vda rw\ngarbage\n"))
	must.ErrorContains(t, err, "line 2")
}

func TestMountInfoFlags(t *testing.T) {
	ro, err := parseMountInfoLine(`1 0 8:1 / /a ro,nosuid shared:1 - ext4 /dev/sda1 rw`)
	must.NoError(t, err)
	must.True(t, ro.readOnly())
	must.True(t, ro.shared())
	rw, err := parseMountInfoLine(`2 0 8:1 / /b rw,rootcontext=ro master:1 - ext4 /dev/sda1 ro`)
	must.NoError(t, err)
	must.False(t, rw.readOnly())
	must.False(t, rw.shared())
}

func TestIsBindOf(t *testing.T) {
	table := `27 1 254:0 / / rw - ext4 /dev/vda rw
30 27 0:40 / /tmp rw - tmpfs tmpfs rw
40 27 254:0 /srv/root/volumes/v1 /stage/v1 rw - ext4 /dev/vda rw
41 27 254:0 /srv/root/volumes/v1 /pub/a rw - ext4 /dev/vda rw
42 27 254:0 /srv/root/volumes/v2 /pub/b rw - ext4 /dev/vda rw
43 30 0:40 /vols/v3 /tmp/pub/c rw - tmpfs tmpfs rw
44 27 254:0 /srv/root/volumes/v1 /pub/d rw - ext4 /dev/vda rw
45 44 0:41 / /pub/d rw - tmpfs other rw
`
	ms, err := parseMountInfo(strings.NewReader(table))
	must.NoError(t, err)
	cases := []struct {
		name       string
		mountPoint string
		dir        string
		want       bool
	}{
		{name: "stage of volume", mountPoint: "/stage/v1", dir: "/srv/root/volumes/v1", want: true},
		{name: "publish of staged volume", mountPoint: "/pub/a", dir: "/srv/root/volumes/v1", want: true},
		{name: "other volume", mountPoint: "/pub/b", dir: "/srv/root/volumes/v1", want: false},
		{name: "volume on another file system", mountPoint: "/tmp/pub/c", dir: "/tmp/vols/v3", want: true},
		{name: "same path, other device", mountPoint: "/tmp/pub/c", dir: "/vols/v3", want: false},
		{name: "not a mount point", mountPoint: "/pub/x", dir: "/srv/root/volumes/v1", want: false},
		{name: "something stacked on top", mountPoint: "/pub/d", dir: "/srv/root/volumes/v1", want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.EqOp(t, tc.want, isBindOf(ms, tc.mountPoint, tc.dir))
		})
	}
}

func TestPathWithin(t *testing.T) {
	cases := []struct {
		path, dir string
		want      bool
	}{
		{"/a/b", "/a", true},
		{"/a", "/a", true},
		{"/ab", "/a", false},
		{"/a/b", "/", true},
		{"/", "/", true},
	}
	for _, tc := range cases {
		must.EqOp(t, tc.want, pathWithin(tc.path, tc.dir), must.Sprintf("%q within %q", tc.path, tc.dir))
	}
}
