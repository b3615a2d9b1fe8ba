package csimanager

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// IsMountpoint reports whether path is the root of a mount in the client's
// mount namespace; a missing path is not one. It asks statx(2) for
// STATX_ATTR_MOUNT_ROOT (Linux 5.8+, about a microsecond) and falls back to
// /proc/self/mountinfo on older kernels.
func IsMountpoint(path string) (bool, error) {
	var sx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_TYPE, &sx)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking whether %q is a mount point: %w", path, err)
	}
	if sx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return sx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false, fmt.Errorf("checking whether %q is a mount point: %w", path, err)
	}
	points, err := mountPoints("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("checking whether %q is a mount point: %w", path, err)
	}
	_, ok := points[real]
	return ok, nil
}

// mountPoints returns the mount points listed in a mountinfo file (field
// 5, octal escapes undone).
func mountPoints(file string) (map[string]struct{}, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]struct{}{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		out[unescapeMountPath(fields[4])] = struct{}{}
	}
	return out, sc.Err()
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
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

// removeEmptyDirs removes dir and then its parents up to (not including)
// stop, as long as they are empty. It never removes a mount point or a
// directory with anything in it.
func removeEmptyDirs(dir, stop string) error {
	for dir != stop && strings.HasPrefix(dir, stop+string(filepath.Separator)) {
		if mounted, err := IsMountpoint(dir); err != nil || mounted {
			return err
		}
		err := os.Remove(dir)
		switch {
		case err == nil, errors.Is(err, fs.ErrNotExist):
		case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST):
			return nil
		default:
			return fmt.Errorf("removing %q: %w", dir, err)
		}
		dir = filepath.Dir(dir)
	}
	return nil
}

// DetachMountsUnder lazily unmounts every mount strictly below dir,
// deepest first, and fails if any remains. Call it before removing a
// directory that may hold staging or publish mounts: os.RemoveAll would
// otherwise delete a volume's contents through them. Detaching never
// touches the data.
func DetachMountsUnder(dir string) error {
	points, err := mountPoints("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("listing mounts under %q: %w", dir, err)
	}
	prefix := filepath.Clean(dir) + string(filepath.Separator)
	var under []string
	for p := range points {
		if strings.HasPrefix(p, prefix) {
			under = append(under, p)
		}
	}
	slices.SortFunc(under, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, p := range under {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("detaching %q: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
