package hostpath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Block volumes. A volume used with the block access type is a file,
// blockImageName, in its directory, created sparse on first use with the
// volume's capacity (DefaultBlockSize when it has none). Staging is the
// same bind of the volume directory as for file-system use. NodePublish
// (once the volume is staged) attaches a loop device to the image in the
// volume directory (not through the staging path, which is read-only for
// reader-only modes) and bind-mounts the device node on the target file;
// NodeUnpublish unmounts it and detaches the loop device.
//
// A read-only publish is a read-only bind of the device node, as most
// block plugins do, and the loop device itself stays writable. That bind
// does not stop writes to the device (the kernel checks device access in
// the device cgroup, not in the mount): keeping a read-only claim
// read-only is the CO's job, and Berth's end-to-end tests use this plugin
// to prove that Berth does it.

// blockImageName is the image file of a block volume, in its directory.
const blockImageName = "block.img"

// DefaultBlockSize is the size of a block volume without a capacity.
const DefaultBlockSize = 16 << 20

// loopMajor is the block major number of loop devices.
const loopMajor = 7

// isBlock reports whether a capability asks for the block access type.
func isBlock(c *csi.VolumeCapability) bool { return c.GetBlock() != nil }

// ensureImage creates a block volume's image file, sparse, if missing.
func ensureImage(path string, size int64) error {
	if size <= 0 {
		size = DefaultBlockSize
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating block image %q: %w", path, err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		os.Remove(path)
		return fmt.Errorf("sizing block image %q: %w", path, err)
	}
	return nil
}

// attachLoop attaches a free loop device to image and returns its node.
func attachLoop(image string) (string, error) {
	ctl, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("opening /dev/loop-control: %w", err)
	}
	defer unix.Close(ctl)
	backing, err := unix.Open(image, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("opening block image %q: %w", image, err)
	}
	defer unix.Close(backing)
	// Another process may take the free device between the two calls
	// (EBUSY): ask again.
	for range 8 {
		n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", fmt.Errorf("finding a free loop device: %w", err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		fd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", fmt.Errorf("opening %s: %w", dev, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(backing)}
		copy(cfg.Info.File_name[:], image)
		err = unix.IoctlLoopConfigure(fd, &cfg)
		unix.Close(fd)
		if errors.Is(err, unix.EBUSY) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("attaching %s to %q: %w", dev, image, err)
		}
		return dev, nil
	}
	return "", fmt.Errorf("attaching a loop device to %q: every free device was taken first", image)
}

// detachLoop detaches a loop device; one already detached is success.
func detachLoop(dev string) error {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENXIO) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening %s: %w", dev, err)
	}
	defer unix.Close(fd)
	if err := unix.IoctlSetInt(fd, unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("detaching %s: %w", dev, err)
	}
	return nil
}

// loopAt returns the loop device whose node is mounted (or sits) at path
// and its backing file, if path is such a node.
func loopAt(path string) (dev, backing string, ok bool) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK || unix.Major(st.Rdev) != loopMajor {
		return "", "", false
	}
	minor := unix.Minor(st.Rdev)
	b, err := os.ReadFile(fmt.Sprintf("/sys/dev/block/%d:%d/loop/backing_file", loopMajor, minor))
	if err != nil {
		return "", "", false
	}
	return fmt.Sprintf("/dev/loop%d", minor), strings.TrimSpace(string(b)), true
}

// publishBlock publishes a block volume at target (see the top of this
// file) and reports whether it created the target file.
func (s *nodeServer) publishBlock(op string, v *Volume, target string, readonly bool) (created bool, err error) {
	image := filepath.Join(s.p.volumeDir(v.ID), blockImageName)
	if err := ensureImage(image, v.CapacityBytes); err != nil {
		return false, err
	}
	f, err := os.OpenFile(target, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		f.Close()
		created = true
	case errors.Is(err, os.ErrExist):
		if _, backing, ok := loopAt(target); ok {
			if backing != image {
				return false, status.Errorf(codes.AlreadyExists, "%s %q: %q already has loop device of %q mounted on it", op, v.ID, target, backing)
			}
			s.p.log.Warn("adopting an unrecorded block publish of the volume", "volume_id", v.ID, "path", target)
			return false, nil
		}
	default:
		return false, fmt.Errorf("creating target file: %w", err)
	}
	dev, err := attachLoop(image)
	if err == nil {
		if err = bindMount(dev, target, readonly); err != nil {
			if derr := detachLoop(dev); derr != nil {
				err = fmt.Errorf("%w (and %v)", err, derr)
			}
		}
	}
	if err != nil {
		if created {
			os.Remove(target)
		}
		return false, err
	}
	s.p.log.Debug("attached block volume", "volume_id", v.ID, "device", dev, "target_path", target, "readonly", readonly)
	return created, nil
}
