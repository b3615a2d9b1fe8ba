package hostpath

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// mountInfo is one line of /proc/<pid>/mountinfo, as proc(5) describes it:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//	(1)(2)(3)   (4)   (5)      (6)      (7)   (8) (9)   (10)         (11)
type mountInfo struct {
	ID, ParentID int
	Major, Minor uint32
	// Root is the path, inside its file system, of the directory mounted
	// here: "/" for a whole file system, the source directory for a bind.
	Root       string
	MountPoint string
	Options    string   // per-mount options, e.g. "rw,relatime"
	Optional   []string // propagation tags, e.g. "shared:1", "master:2"
	FSType     string
	Source     string
	SuperOpts  string
}

// readOnly reports whether the mount itself is read-only.
func (m mountInfo) readOnly() bool {
	for _, o := range strings.Split(m.Options, ",") {
		if o == "ro" {
			return true
		}
	}
	return false
}

// shared reports whether the mount is in a shared peer group.
func (m mountInfo) shared() bool {
	for _, o := range m.Optional {
		if strings.HasPrefix(o, "shared:") {
			return true
		}
	}
	return false
}

// readMountInfo parses a mountinfo file, e.g. /proc/self/mountinfo.
func readMountInfo(path string) ([]mountInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading mount table: %w", err)
	}
	defer f.Close()
	ms, err := parseMountInfo(f)
	if err != nil {
		return nil, fmt.Errorf("reading mount table %s: %w", path, err)
	}
	return ms, nil
}

// parseMountInfo parses the mountinfo format, one mount per line.
func parseMountInfo(r io.Reader) ([]mountInfo, error) {
	var ms []mountInfo
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		m, err := parseMountInfoLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		ms = append(ms, m)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return ms, nil
}

func parseMountInfoLine(line string) (mountInfo, error) {
	var m mountInfo
	fields := strings.Fields(line)
	sep := -1
	for i := 6; i < len(fields); i++ {
		if fields[i] == "-" {
			sep = i
			break
		}
	}
	if len(fields) < 7 || sep < 0 || len(fields) < sep+3 {
		return m, fmt.Errorf("malformed mountinfo line %q", line)
	}
	var err error
	if m.ID, err = strconv.Atoi(fields[0]); err != nil {
		return m, fmt.Errorf("bad mount id in %q", line)
	}
	if m.ParentID, err = strconv.Atoi(fields[1]); err != nil {
		return m, fmt.Errorf("bad parent id in %q", line)
	}
	major, minor, ok := strings.Cut(fields[2], ":")
	if !ok {
		return m, fmt.Errorf("bad major:minor in %q", line)
	}
	maj, err1 := strconv.ParseUint(major, 10, 32)
	mnr, err2 := strconv.ParseUint(minor, 10, 32)
	if err1 != nil || err2 != nil {
		return m, fmt.Errorf("bad major:minor in %q", line)
	}
	m.Major, m.Minor = uint32(maj), uint32(mnr)
	m.Root = unescapeMountPath(fields[3])
	m.MountPoint = unescapeMountPath(fields[4])
	m.Options = fields[5]
	if sep > 6 {
		m.Optional = fields[6:sep]
	}
	m.FSType = fields[sep+1]
	m.Source = unescapeMountPath(fields[sep+2])
	if len(fields) > sep+3 {
		m.SuperOpts = fields[sep+3]
	}
	return m, nil
}

// unescapeMountPath undoes the kernel's octal escapes of space, tab,
// newline and backslash (\040, \011, \012, \134).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// mountAt returns the topmost mount at mountPoint (the last one listed).
func mountAt(ms []mountInfo, mountPoint string) (mountInfo, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].MountPoint == mountPoint {
			return ms[i], true
		}
	}
	return mountInfo{}, false
}

// mountOf returns the mount that contains path: the topmost one whose mount
// point is the longest prefix of path.
func mountOf(ms []mountInfo, path string) (mountInfo, bool) {
	best, found := mountInfo{}, false
	for _, m := range ms {
		if !pathWithin(path, m.MountPoint) {
			continue
		}
		if !found || len(m.MountPoint) >= len(best.MountPoint) {
			best, found = m, true
		}
	}
	return best, found
}

// pathWithin reports whether path is dir or below it.
func pathWithin(path, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(path, "/")
	}
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// isBindOf reports whether the topmost mount at mountPoint shows the
// directory dir: same file system, and its root is dir's path inside that
// file system. It recognises both a bind of dir and a bind of such a bind.
// Both paths must be absolute, clean and free of symlinks.
func isBindOf(ms []mountInfo, mountPoint, dir string) bool {
	m, ok := mountAt(ms, mountPoint)
	if !ok {
		return false
	}
	c, ok := mountOf(ms, dir)
	if !ok || c.Major != m.Major || c.Minor != m.Minor {
		return false
	}
	rel, err := filepath.Rel(c.MountPoint, dir)
	if err != nil {
		return false
	}
	return filepath.Join(c.Root, rel) == m.Root
}
