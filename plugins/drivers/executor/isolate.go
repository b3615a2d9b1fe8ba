package executor

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// devices are the host device nodes bound into the task's /dev.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// devLinks are the symlinks in the task's /dev.
var devLinks = map[string]string{
	"fd":     "/proc/self/fd",
	"stdin":  "/proc/self/fd/0",
	"stdout": "/proc/self/fd/1",
	"stderr": "/proc/self/fd/2",
}

// isolate moves the calling thread into a new mount namespace and builds
// the task's root there (the package doc shows the layout). The caller has
// locked its goroutine to the thread and forks the task from it.
//
// Everything is done with the fd-based mount API (open_tree, mount_setattr,
// move_mount, fsopen; Linux 5.12+): mounts are made read-only before they
// are ever visible, and mount points are opened with RESOLVE_IN_ROOT, so a
// symlink the task left in its root on an earlier run cannot send a mount
// outside it.
//
// withProc mounts the task's /proc; without, the caller mounts one later
// (init, from inside the task's PID namespace).
func isolate(iso *Isolation, withProc bool) error {
	if !path.IsAbs(iso.Root) {
		return fmt.Errorf("isolating task: root %q is not absolute", iso.Root)
	}
	// Clone the bind sources first, while still in the host's namespace: a
	// clone of a shared mount joins its peer group, which is what lets a
	// bidirectional volume propagate the task's mounts back to the host.
	// A clone taken after the namespace is made a slave below would only
	// ever receive.
	var srcs sources
	defer srcs.close()
	if err := srcs.cloneAll(iso, withProc); err != nil {
		return err
	}

	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("isolating task: creating a mount namespace: %w", err)
	}
	// Make every mount a slave: nothing mounted here can propagate to the
	// host, yet the host's unmounts still propagate in. (A private copy
	// would pin every mount the host had at this moment, other allocs'
	// volumes included, until this task exits.)
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("isolating task: making the mount namespace a slave: %w", err)
	}
	// Open the root only now: an fd opened before the unshare names the
	// host's mount, and mounting on it would mount in the host's namespace.
	rootfd, err := unix.Open(iso.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("isolating task: opening root %q: %w", iso.Root, err)
	}
	defer unix.Close(rootfd)

	// fillDev appends the device nodes it attaches itself to srcs.list (to
	// close them with the rest); range does not visit them again.
	for _, s := range srcs.list {
		if err := s.attach(rootfd); err != nil {
			return fmt.Errorf("isolating task: %w", err)
		}
		if s.then != nil {
			if err := s.then(rootfd); err != nil {
				return fmt.Errorf("isolating task: %w", err)
			}
		}
	}
	return nil
}

// source is one thing to put into the task's root, in order.
type source struct {
	target string // absolute, inside the root
	// One of: fd, a detached mount to attach at target (file is true if it
	// is a file, not a directory); link, a symlink to create at target;
	// dir, a plain directory to create at target with that mode.
	fd   int
	file bool
	link string
	dir  os.FileMode
	// then runs after the attach (to fill /dev once its tmpfs is there).
	then func(rootfd int) error
}

// sources are the prepared pieces of a task root.
type sources struct {
	list []*source
}

// cloneAll prepares every piece of the root, in the order they are
// attached: host dirs, /dev, /proc, /tmp, then the binds (which may sit
// below any of those).
func (ss *sources) cloneAll(iso *Isolation, withProc bool) error {
	for _, d := range iso.HostDirs {
		fi, err := os.Lstat(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("isolating task: host dir %q: %w", d, err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			link, err := os.Readlink(d)
			if err != nil {
				return fmt.Errorf("isolating task: host dir %q: %w", d, err)
			}
			ss.list = append(ss.list, &source{target: d, fd: -1, link: link})
			continue
		}
		fd, err := cloneTree(d, true, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID, unix.MS_PRIVATE)
		if err != nil {
			return err
		}
		ss.list = append(ss.list, &source{target: d, fd: fd})
	}

	dev, err := newFS("tmpfs", map[string]string{"mode": "0755", "size": "65536"}, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return err
	}
	ss.list = append(ss.list, &source{target: "/dev", fd: dev, then: ss.fillDev})
	if withProc {
		proc, err := newProc(iso.HidePIDs)
		if err != nil {
			return err
		}
		ss.list = append(ss.list, &source{target: "/proc", fd: proc})
	}
	ss.list = append(ss.list, &source{target: "/tmp", fd: -1, dir: 0o777 | os.ModeSticky})

	for _, b := range iso.Binds {
		if !path.IsAbs(b.TaskPath) || path.Clean(b.TaskPath) == "/" {
			return fmt.Errorf("isolating task: bind of %q: task path %q must be absolute and not /", b.HostPath, b.TaskPath)
		}
		prop, err := propagationFlag(b.Propagation)
		if err != nil {
			return fmt.Errorf("isolating task: bind of %q at %q: %w", b.HostPath, b.TaskPath, err)
		}
		fi, err := os.Stat(b.HostPath)
		if err != nil {
			return fmt.Errorf("isolating task: bind at %q: %w", b.TaskPath, err)
		}
		var attr uint64
		if b.Readonly {
			attr = unix.MOUNT_ATTR_RDONLY
		}
		fd, err := cloneTree(b.HostPath, true, attr, prop)
		if err != nil {
			return err
		}
		ss.list = append(ss.list, &source{target: path.Clean(b.TaskPath), fd: fd, file: !fi.IsDir()})
	}
	return nil
}

// fillDev binds the host's device nodes into the task's fresh /dev and
// adds the usual symlinks and a /dev/shm.
func (ss *sources) fillDev(rootfd int) error {
	for _, name := range devices {
		host := "/dev/" + name
		if _, err := os.Stat(host); err != nil {
			continue // not on this host
		}
		fd, err := cloneTree(host, false, 0, unix.MS_PRIVATE)
		if err != nil {
			return err
		}
		s := &source{target: host, fd: fd, file: true}
		ss.list = append(ss.list, s) // closed with the rest
		if err := s.attach(rootfd); err != nil {
			return err
		}
	}
	for name, to := range devLinks {
		s := &source{target: "/dev/" + name, fd: -1, link: to}
		if err := s.attach(rootfd); err != nil {
			return err
		}
	}
	shm, err := newFS("tmpfs", map[string]string{"mode": "1777"}, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return err
	}
	s := &source{target: "/dev/shm", fd: shm}
	ss.list = append(ss.list, s)
	return s.attach(rootfd)
}

// close releases the detached mounts (attached ones stay mounted).
func (ss *sources) close() {
	for _, s := range ss.list {
		if s.fd >= 0 {
			unix.Close(s.fd)
		}
	}
}

// attach puts the piece at its target in the root.
func (s *source) attach(rootfd int) error {
	switch {
	case s.link != "":
		parent, err := mkdirInRoot(rootfd, path.Dir(s.target))
		if err != nil {
			return err
		}
		defer unix.Close(parent)
		err = unix.Symlinkat(s.link, parent, path.Base(s.target))
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("creating symlink %q -> %q in the task root: %w", s.target, s.link, err)
		}
		return nil
	case s.fd < 0:
		fd, err := mkdirInRoot(rootfd, s.target)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		// Reopen to chmod: an O_PATH fd cannot fchmod.
		dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening %q in the task root: %w", s.target, err)
		}
		defer unix.Close(dfd)
		mode := uint32(s.dir.Perm())
		if s.dir&os.ModeSticky != 0 {
			mode |= unix.S_ISVTX
		}
		if err := unix.Fchmod(dfd, mode); err != nil {
			return fmt.Errorf("setting the mode of %q in the task root: %w", s.target, err)
		}
		return nil
	}
	var target int
	var err error
	if s.file {
		target, err = mkfileInRoot(rootfd, s.target)
	} else {
		target, err = mkdirInRoot(rootfd, s.target)
	}
	if err != nil {
		return err
	}
	defer unix.Close(target)
	if err := unix.MoveMount(s.fd, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("mounting at %q in the task root: %w", s.target, err)
	}
	return nil
}

// cloneTree clones the mount tree at src (recursively if asked) into a
// detached mount with the attributes and propagation (MS_PRIVATE, MS_SLAVE
// or MS_SHARED) given, and returns its fd.
func cloneTree(src string, recursive bool, attr uint64, propagation uint64) (int, error) {
	flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC)
	setFlags := uint(unix.AT_EMPTY_PATH)
	if recursive {
		flags |= unix.AT_RECURSIVE
		setFlags |= unix.AT_RECURSIVE
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, flags)
	if err != nil {
		return -1, fmt.Errorf("cloning the mount at %q: %w", src, err)
	}
	ma := &unix.MountAttr{Attr_set: attr, Propagation: propagation}
	if err := unix.MountSetattr(fd, "", setFlags, ma); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("setting the attributes of the clone of %q: %w", src, err)
	}
	return fd, nil
}

// newFS creates a detached mount of a fresh file system.
func newFS(fstype string, opts map[string]string, attr int) (int, error) {
	fsfd, err := unix.Fsopen(fstype, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("creating a %s: %w", fstype, err)
	}
	defer unix.Close(fsfd)
	for k, v := range opts {
		if err := unix.FsconfigSetString(fsfd, k, v); err != nil {
			return -1, fmt.Errorf("creating a %s: option %s=%s: %w", fstype, k, v, err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, fmt.Errorf("creating a %s: %w", fstype, err)
	}
	fd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, attr)
	if err != nil {
		return -1, fmt.Errorf("mounting a %s: %w", fstype, err)
	}
	return fd, nil
}

// newProc creates a detached /proc of the calling process's PID
// namespace; hidePIDs shows each user only its own processes.
func newProc(hidePIDs bool) (int, error) {
	var opts map[string]string
	if hidePIDs {
		// "2" is hidepid=invisible, spelled so kernels before 5.8 take it.
		opts = map[string]string{"hidepid": "2"}
	}
	return newFS("proc", opts, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
}

// propagationFlag maps a jobspec propagation mode to its mount flag.
func propagationFlag(mode string) (uint64, error) {
	switch mode {
	case "", PropagationPrivate:
		return unix.MS_PRIVATE, nil
	case PropagationHostToTask:
		return unix.MS_SLAVE, nil
	case PropagationBidirectional:
		return unix.MS_SHARED, nil
	}
	return 0, fmt.Errorf("unknown propagation mode %q: use %q, %q or %q",
		mode, PropagationPrivate, PropagationHostToTask, PropagationBidirectional)
}

// openInRoot opens p (absolute, as the task sees it) below rootfd with
// O_PATH, resolving symlinks and ".." as if rootfd were /, so nothing can
// lead outside it.
func openInRoot(rootfd int, p string, flags uint64) (int, error) {
	rel := strings.TrimLeft(path.Clean("/"+p), "/")
	if rel == "" {
		rel = "."
	}
	return unix.Openat2(rootfd, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | flags,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// mkdirInRoot creates dir and its missing parents below rootfd and returns
// an O_PATH fd to it.
func mkdirInRoot(rootfd int, dir string) (int, error) {
	fd, err := openInRoot(rootfd, dir, unix.O_DIRECTORY)
	if !errors.Is(err, unix.ENOENT) {
		if err != nil {
			return -1, fmt.Errorf("opening %q in the task root: %w", dir, err)
		}
		return fd, nil
	}
	parent, err := mkdirInRoot(rootfd, path.Dir(path.Clean("/"+dir)))
	if err != nil {
		return -1, err
	}
	err = unix.Mkdirat(parent, path.Base(dir), 0o755)
	unix.Close(parent)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, fmt.Errorf("creating %q in the task root: %w", dir, err)
	}
	fd, err = openInRoot(rootfd, dir, unix.O_DIRECTORY)
	if err != nil {
		return -1, fmt.Errorf("opening %q in the task root: %w", dir, err)
	}
	return fd, nil
}

// mkfileInRoot creates an empty file (a mount point for a file bind) and
// its missing parents below rootfd and returns an O_PATH fd to it.
func mkfileInRoot(rootfd int, file string) (int, error) {
	parent, err := mkdirInRoot(rootfd, path.Dir(file))
	if err != nil {
		return -1, err
	}
	fd, err := unix.Openat(parent, path.Base(file), unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	unix.Close(parent)
	if err != nil && !errors.Is(err, unix.EISDIR) {
		return -1, fmt.Errorf("creating %q in the task root: %w", file, err)
	}
	if err == nil {
		unix.Close(fd)
	}
	fd, err = openInRoot(rootfd, file, 0)
	if err != nil {
		return -1, fmt.Errorf("opening %q in the task root: %w", file, err)
	}
	return fd, nil
}
