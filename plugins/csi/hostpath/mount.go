package hostpath

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// selfMountInfo is the mount table of this process's mount namespace.
const selfMountInfo = "/proc/self/mountinfo"

// maxStackedMounts bounds unmountAll, in case mounts were stacked on a path.
const maxStackedMounts = 16

// bindMount bind-mounts src on dst, read-only if asked. A read-only bind is
// a bind followed by a remount: the kernel ignores MS_RDONLY on the first
// call.
func bindMount(src, dst string, readonly bool) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mounting %q on %q: %w", src, dst, err)
	}
	if !readonly {
		return nil
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		// Never leave a writable mount behind a failed read-only request.
		if uerr := unix.Unmount(dst, unix.UMOUNT_NOFOLLOW); uerr != nil {
			return fmt.Errorf("remounting %q read-only: %w (and unmounting it: %v)", dst, err, uerr)
		}
		return fmt.Errorf("remounting %q read-only: %w", dst, err)
	}
	return nil
}

// unmountAll unmounts path until nothing is mounted there, and reports how
// many mounts it removed. A path that does not exist or is not a mount point
// is not an error: that is what makes NodeUnpublish and NodeUnstage
// idempotent. It never detaches lazily: a busy mount (EBUSY) is an error the
// CO retries, rather than a mount that silently lives on.
func unmountAll(path string) (int, error) {
	for n := 0; n < maxStackedMounts; n++ {
		err := unix.Unmount(path, unix.UMOUNT_NOFOLLOW)
		switch {
		case err == nil:
			continue
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			// EINVAL: not a mount point (our flags are valid).
			return n, nil
		default:
			return n, fmt.Errorf("unmounting %q: %w", path, err)
		}
	}
	return maxStackedMounts, fmt.Errorf("unmounting %q: still mounted after %d unmounts", path, maxStackedMounts)
}

// isMountpoint reports whether path is the root of a mount. It asks statx(2)
// for STATX_ATTR_MOUNT_ROOT (Linux 5.8+), which costs about a microsecond;
// on older kernels it looks the path up in /proc/self/mountinfo, which costs
// tens of microseconds and grows with the number of mounts.
func isMountpoint(path string) (bool, error) {
	var sx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_TYPE, &sx)
	if err != nil {
		return false, fmt.Errorf("checking whether %q is a mount point: %w", path, err)
	}
	if sx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return sx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
	}
	ms, err := readMountInfo(selfMountInfo)
	if err != nil {
		return false, err
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false, fmt.Errorf("checking whether %q is a mount point: %w", path, err)
	}
	_, ok := mountAt(ms, real)
	return ok, nil
}

// mountShows reports whether the mount at mountPoint is a bind of dir (or a
// bind of a bind of it), from /proc/self/mountinfo. It is the slow path,
// used only when a mount exists that the state does not record (the plugin
// died between mounting and recording).
func mountShows(mountPoint, dir string) (bool, error) {
	ms, err := readMountInfo(selfMountInfo)
	if err != nil {
		return false, err
	}
	mp, err := filepath.EvalSymlinks(mountPoint)
	if err != nil {
		return false, fmt.Errorf("resolving %q: %w", mountPoint, err)
	}
	d, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false, fmt.Errorf("resolving %q: %w", dir, err)
	}
	return isBindOf(ms, mp, d), nil
}
