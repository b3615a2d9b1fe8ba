package executor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Entering a running task (alloc exec). EnterTask starts a command in the
// environment of the task whose process is pid, as read from /proc/<pid>:
//
//	mount, IPC, PID namespaces  setns into the task's
//	root and working dir        the task's (an exec task's chroot)
//	user and groups             the task's real uid, gid and groups
//	capability bounding set     the task's: nothing the task could not do
//	environment                 the task's initial environment
//	cgroup (v2)                 the task's, when it has its own: its limits
//	                            and device filter (a read-only device stays
//	                            read-only) hold for the command too
//
// It needs nothing from the driver but the pid, so it serves every driver
// that runs a process: for raw_exec the namespaces and root are the host's
// and the command runs in the task dir as the task's user.
//
// Namespaces are per thread. The command is forked from a dedicated OS
// thread that first unshares its fs attributes (setns into a mount
// namespace refuses a thread that shares them), enters the namespaces,
// chroots and drops capabilities; the fork inherits all of it. That thread
// stays locked to its goroutine until the goroutine ends, so Go retires it
// rather than running other goroutines in the task's namespaces.

// EnterConfig is a command to run inside a task.
type EnterConfig struct {
	// PID is the task's process.
	PID int
	// Argv is the command and its arguments; Argv[0] is looked up in the
	// task's PATH inside the task's root.
	Argv []string
	// Stdin, Stdout and Stderr are the command's streams, as exec.Cmd's.
	// With a terminal, pass its slave for all three and set TTY.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// TTY makes Stdin the command's controlling terminal (in a session of
	// its own).
	TTY bool
}

// taskView is what EnterTask reads of the task from /proc.
type taskView struct {
	uid, gid uint32
	groups   []uint32
	capBnd   uint64
	env      []string
}

// EnterTask starts cfg's command inside the task; the caller waits for it
// with the returned Cmd.
func EnterTask(cfg EnterConfig) (*exec.Cmd, error) {
	if len(cfg.Argv) == 0 || cfg.Argv[0] == "" {
		return nil, errors.New("entering task: no command given")
	}
	if cfg.PID <= 0 {
		return nil, fmt.Errorf("entering task: invalid pid %d", cfg.PID)
	}
	view, err := readTaskView(cfg.PID)
	if err != nil {
		return nil, err
	}
	type result struct {
		cmd *exec.Cmd
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// Never unlocked: see the comment at the top of the file.
		runtime.LockOSThread()
		cmd, err := startEntered(cfg, view)
		ch <- result{cmd, err}
	}()
	r := <-ch
	return r.cmd, r.err
}

// startEntered runs on the dedicated thread.
func startEntered(cfg EnterConfig, view *taskView) (*exec.Cmd, error) {
	proc := "/proc/" + strconv.Itoa(cfg.PID)
	// Open everything of the task's while this thread sees the host's
	// /proc: after setns, /proc may be another mount.
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	open := func(name string, flags int) (int, error) {
		fd, err := unix.Open(proc+"/"+name, flags|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, fmt.Errorf("entering task (pid %d): opening %s: %w", cfg.PID, name, err)
		}
		fds = append(fds, fd)
		return fd, nil
	}
	mntfd, err := open("ns/mnt", unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	ipcfd, err := open("ns/ipc", unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	pidnsfd, err := open("ns/pid", unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	rootfd, err := open("root", unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	cwdfd, err := open("cwd", unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	// The cgroup directory is a host path: open it before setns too.
	cgfd, err := openTaskCgroup(cfg.PID)
	if err != nil {
		return nil, err
	}
	if cgfd >= 0 {
		fds = append(fds, cgfd)
	}

	// This thread's own namespaces, to go back to once the command is
	// started. The thread is retired with its goroutine, except when it
	// is the process's main thread, which Go parks for good instead: it
	// would pin the task's namespaces (and every mount in them) for the
	// agent's life.
	var back []struct{ fd, nstype int }
	for _, ns := range []struct {
		name   string
		nstype int
	}{{"mnt", unix.CLONE_NEWNS}, {"ipc", unix.CLONE_NEWIPC}, {"pid", unix.CLONE_NEWPID}} {
		fd, err := unix.Open("/proc/thread-self/ns/"+ns.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("entering task: opening this thread's %s namespace: %w", ns.name, err)
		}
		fds = append(fds, fd)
		back = append(back, struct{ fd, nstype int }{fd, ns.nstype})
	}
	defer func() {
		// Joining the mount namespace back also resets root and cwd.
		for _, b := range back {
			_ = unix.Setns(b.fd, b.nstype)
		}
	}()

	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return nil, fmt.Errorf("entering task: unsharing fs attributes: %w", err)
	}
	if err := unix.Setns(mntfd, unix.CLONE_NEWNS); err != nil {
		return nil, fmt.Errorf("entering task (pid %d): joining its mount namespace: %w", cfg.PID, err)
	}
	if err := unix.Setns(ipcfd, unix.CLONE_NEWIPC); err != nil {
		return nil, fmt.Errorf("entering task (pid %d): joining its IPC namespace: %w", cfg.PID, err)
	}
	// The command's own pid comes from the task's PID namespace (an exec
	// task's, see init.go), so it sees what the task's /proc shows. Only
	// children change namespace; a runtime thread is never cloned from
	// this locked one.
	if err := unix.Setns(pidnsfd, unix.CLONE_NEWPID); err != nil {
		return nil, fmt.Errorf("entering task (pid %d): joining its PID namespace: %w", cfg.PID, err)
	}
	if err := unix.Fchdir(rootfd); err != nil {
		return nil, fmt.Errorf("entering task (pid %d): changing to its root: %w", cfg.PID, err)
	}
	if err := unix.Chroot("."); err != nil {
		return nil, fmt.Errorf("entering task (pid %d): chroot to its root: %w", cfg.PID, err)
	}
	if err := unix.Fchdir(cwdfd); err != nil {
		return nil, fmt.Errorf("entering task (pid %d): changing to its working directory: %w", cfg.PID, err)
	}
	if err := dropBoundingCaps(view.capBnd); err != nil {
		return nil, fmt.Errorf("entering task (pid %d): %w", cfg.PID, err)
	}
	dir, err := os.Getwd()
	if err != nil {
		dir = "/"
	}
	// Resolved on this thread, so inside the task's root.
	path, err := lookPath("", dir, cfg.Argv[0], pathOf(view.env))
	if err != nil {
		return nil, fmt.Errorf("running %q in the task: %w", cfg.Argv[0], err)
	}
	cmd := &exec.Cmd{
		Path:   path,
		Args:   cfg.Argv,
		Env:    view.env,
		Stdin:  cfg.Stdin,
		Stdout: cfg.Stdout,
		Stderr: cfg.Stderr,
		SysProcAttr: &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: view.uid, Gid: view.gid, Groups: view.groups},
		},
	}
	if cgfd >= 0 {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cgfd
	}
	if cfg.TTY {
		cmd.SysProcAttr.Setsid = true
		cmd.SysProcAttr.Setctty = true
		cmd.SysProcAttr.Ctty = 0 // stdin, in the child
	} else {
		cmd.SysProcAttr.Setpgid = true
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("running %q in the task: %w", cfg.Argv[0], err)
	}
	return cmd, nil
}

// dropBoundingCaps drops from this thread's bounding set every capability
// not in keep (a /proc CapBnd mask).
func dropBoundingCaps(keep uint64) error {
	last, err := lastCap()
	if err != nil {
		return err
	}
	for c := 0; c <= last && c < 64; c++ {
		if keep&(1<<uint(c)) != 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	return nil
}

// readTaskView reads the task's credentials, bounding set and environment.
func readTaskView(pid int) (*taskView, error) {
	proc := "/proc/" + strconv.Itoa(pid)
	status, err := os.ReadFile(proc + "/status")
	if err != nil {
		return nil, fmt.Errorf("entering task: reading pid %d: %w", pid, err)
	}
	v, err := parseStatus(status)
	if err != nil {
		return nil, fmt.Errorf("entering task: reading pid %d: %w", pid, err)
	}
	environ, err := os.ReadFile(proc + "/environ")
	if err != nil {
		return nil, fmt.Errorf("entering task: reading the environment of pid %d: %w", pid, err)
	}
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if len(kv) > 0 {
			v.env = append(v.env, string(kv))
		}
	}
	return v, nil
}

// parseStatus reads Uid, Gid, Groups and CapBnd from /proc/<pid>/status.
func parseStatus(b []byte) (*taskView, error) {
	v := &taskView{}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		switch key {
		case "Uid", "Gid":
			if len(f) == 0 {
				return nil, fmt.Errorf("empty %s line", key)
			}
			n, err := strconv.ParseUint(f[0], 10, 32)
			if err != nil {
				return nil, fmt.Errorf("bad %s line %q: %w", key, line, err)
			}
			if key == "Uid" {
				v.uid = uint32(n)
			} else {
				v.gid = uint32(n)
			}
		case "Groups":
			for _, g := range f {
				n, err := strconv.ParseUint(g, 10, 32)
				if err != nil {
					return nil, fmt.Errorf("bad Groups line %q: %w", line, err)
				}
				v.groups = append(v.groups, uint32(n))
			}
		case "CapBnd":
			if len(f) == 0 {
				return nil, errors.New("empty CapBnd line")
			}
			n, err := strconv.ParseUint(f[0], 16, 64)
			if err != nil {
				return nil, fmt.Errorf("bad CapBnd line %q: %w", line, err)
			}
			v.capBnd = n
		default:
			continue
		}
		seen[key] = true
	}
	for _, k := range []string{"Uid", "Gid", "CapBnd"} {
		if !seen[k] {
			return nil, fmt.Errorf("no %s line in the process status", k)
		}
	}
	return v, nil
}

// openTaskCgroup opens the task's cgroup v2 directory when it differs from
// this process's, for CLONE_INTO_CGROUP; -1 when there is nothing to join.
// A task in a cgroup of its own that cannot be opened is an error: the
// command must not run outside the task's limits and device filter.
func openTaskCgroup(pid int) (int, error) {
	task, err := cgroup2Path("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return -1, fmt.Errorf("entering task (pid %d): %w", pid, err)
	}
	self, err := cgroup2Path("/proc/self/cgroup")
	if err != nil {
		return -1, fmt.Errorf("entering task (pid %d): %w", pid, err)
	}
	if task == "" || task == self {
		return -1, nil
	}
	root, err := cgroup2Root()
	if err != nil {
		return -1, fmt.Errorf("entering task (pid %d) in its cgroup %s: %w", pid, task, err)
	}
	fd, err := unix.Open(root+task, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("entering task (pid %d): opening its cgroup %s: %w", pid, task, err)
	}
	return fd, nil
}

// cgroup2Path reads the cgroup v2 path ("0::<path>") from a
// /proc/<pid>/cgroup file; "" when the process has none.
func cgroup2Path(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", file, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", nil
}
