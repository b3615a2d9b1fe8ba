// Package exec is the exec task driver (Linux, root only): it runs the
// task's command chrooted into its task dir, in a private mount namespace
// built from bind mounts, and bind-mounts the task's volumes into it
// (Capabilities.MountConfig is "all").
//
// Config keys are raw_exec's:
//
//	command  string, required: an absolute path inside the chroot, a path
//	         relative to its /, or a name looked up in the task's PATH
//	args     list of strings
//
// The task's root, which the executor builds in the task's own mount
// namespace under TaskDir (so the mounts never appear in the host's mount
// table, and vanish with the task):
//
//	/                  TaskDir itself (local/, secrets/, ... as the client made them)
//	/bin /sbin /lib    the host's, bound read-only (recursively, nosuid); a host
//	/lib64 /usr /etc   dir that is a symlink (merged /usr) is the same symlink here
//	/dev               a fresh tmpfs: null zero full random urandom tty bound from
//	                   the host, fd stdin stdout stderr symlinks, a tmpfs /dev/shm
//	/proc              a fresh procfs (the host's pid namespace, see below),
//	                   hidepid=invisible: a task sees its own user's processes only
//	/tmp               TaskDir/tmp, a plain directory (mode 1777), the task's own
//	/alloc             the alloc's shared dir (TaskConfig.AllocDir), read-write
//	<TaskPath>         each volume mount: its HostPath bound there, read-only if
//	                   asked, with the propagation asked (private by default;
//	                   host-to-task is a slave, bidirectional shares the host's
//	                   peer group, so the task's mounts below it reach the host)
//
// Mount points missing in TaskDir are created there (empty directories or
// files, left behind when the task ends).
//
// Who the task is: the task's user field, else nobody (a CSI plugin task,
// which mounts for the node, defaults to root). The task dir is 0700 and
// given to that user. The task's capability bounding set is DefaultCaps
// (or the agent config's plugin "exec" { config { allow_caps = [...] } }),
// so even a root task cannot gain sys_admin; a task that is not root holds
// no capability at all; a CSI plugin task keeps them all. The task gets
// its own IPC namespace.
//
// The task stays in the host's pid namespace: a task in its own would be
// its pid 1, which ignores SIGTERM unless it handles it, and StopTask would
// always end in SIGKILL (a small init forwarding signals would fix that;
// not built yet). hidepid keeps a task that is not root from seeing the
// agent's or other users' processes; a root task still sees them. The
// chroot confines paths, not a determined root task: this is isolation
// for well-behaved tasks, not a security boundary.
package exec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/executor"
	"github.com/berth-io/berth/plugins/drivers/internal/procdriver"
)

// Name is the driver's name in jobspecs.
const Name = "exec"

// HostDirs are the host directories every task's root gets, read-only.
var HostDirs = []string{"/bin", "/etc", "/lib", "/lib64", "/sbin", "/usr"}

// AllocDirPath is where the alloc's shared dir appears in the task.
const AllocDirPath = "/alloc"

// Config configures the driver.
type Config struct {
	// StateDir holds each task's executor directory (spec, status file,
	// executor log); it must survive client restarts. The client passes
	// one under its data_dir; "" means a directory under os.TempDir().
	StateDir string
	// ExecutorPath is the program run as the executor; "" means this
	// program.
	ExecutorPath string
	// AllowCaps is the capability bounding set of tasks (lowercase, no
	// "cap_"): the agent config's plugin "exec" { config { allow_caps } }.
	// Nil means DefaultCaps. A CSI plugin task keeps every capability.
	AllowCaps []string
}

// DefaultCaps is the bounding set of an exec task unless the agent config
// says otherwise: what a root task commonly needs (own files, bind low
// ports, switch users), and nothing that administers the host
// (sys_admin, sys_module, net_admin, sys_ptrace...). A task that is not
// root holds none of them anyway.
var DefaultCaps = []string{
	"audit_write", "chown", "dac_override", "fowner", "fsetid", "kill", "mknod",
	"net_bind_service", "setfcap", "setgid", "setpcap", "setuid", "sys_chroot",
}

// DefaultUser is who an exec task runs as unless its user field says.
const DefaultUser = "nobody"

// New returns the exec driver.
func New(logger hclog.Logger, cfg Config) drivers.Driver {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return procdriver.New(procdriver.Config{
		Name:         Name,
		Logger:       logger.Named(Name),
		StateDir:     cfg.StateDir,
		ExecutorPath: cfg.ExecutorPath,
		Capabilities: drivers.Capabilities{MountConfig: structs.MountConfigSupportAll},
		Fingerprint:  fingerprint,
		Spec:         func(tc *drivers.TaskConfig) (*executor.Spec, error) { return spec(tc, cfg.AllowCaps) },
	})
}

// geteuid is os.Geteuid; tests replace it.
var geteuid = os.Geteuid

func fingerprint(context.Context) *structs.DriverInfo {
	unhealthy := func(why string) *structs.DriverInfo {
		return &structs.DriverInfo{Detected: false, Healthy: false, HealthDescription: why}
	}
	if runtime.GOOS != "linux" {
		return unhealthy("exec driver needs Linux")
	}
	if geteuid() != 0 {
		return unhealthy("exec driver needs root")
	}
	// The executor builds roots with the fd-based mount API.
	if err := unix.MountSetattr(-1, "", unix.AT_EMPTY_PATH, &unix.MountAttr{}); errors.Is(err, unix.ENOSYS) {
		return unhealthy("exec driver needs Linux 5.12 or later (mount_setattr)")
	}
	return &structs.DriverInfo{
		Detected:          true,
		Healthy:           true,
		HealthDescription: "healthy",
		Attributes:        map[string]string{"driver.exec": "1"},
	}
}

// spec validates the task's config and says what the executor runs.
func spec(cfg *drivers.TaskConfig, allowCaps []string) (*executor.Spec, error) {
	command, args, err := procdriver.Command(cfg, Name)
	if err != nil {
		return nil, err
	}
	if cfg.TaskDir == "" || !path.IsAbs(cfg.TaskDir) {
		return nil, fmt.Errorf("task %q: the task dir %q must be an absolute path", cfg.Name, cfg.TaskDir)
	}
	iso := &executor.Isolation{Root: cfg.TaskDir, HostDirs: HostDirs}
	if cfg.AllocDir != "" {
		iso.Binds = append(iso.Binds, executor.Bind{HostPath: cfg.AllocDir, TaskPath: AllocDirPath})
	}
	for _, m := range cfg.Mounts {
		b, err := bind(cfg, m)
		if err != nil {
			return nil, err
		}
		iso.Binds = append(iso.Binds, b)
	}
	// Parents before children: a volume mounted below another must land
	// on top of it, not under it.
	sort.SliceStable(iso.Binds, func(i, j int) bool {
		return depth(iso.Binds[i].TaskPath) < depth(iso.Binds[j].TaskPath)
	})
	u, err := taskUser(cfg)
	if err != nil {
		return nil, err
	}
	caps := allowCaps
	if caps == nil {
		caps = DefaultCaps
	}
	if cfg.Privileged {
		caps = nil
	}
	if u.UID != 0 {
		// The task dir is 0700: the task owns its root and its own dirs.
		iso.OwnDirs = []string{"/", "/local", "/secrets", "/tmp"}
	}
	iso.HidePIDs = true
	return &executor.Spec{
		TaskID:     cfg.ID,
		Command:    command,
		Args:       args,
		Env:        procdriver.Env(cfg.Env),
		Dir:        "/",
		StdoutPath: cfg.StdoutPath,
		StderrPath: cfg.StderrPath,
		Isolation:  iso,
		User:       u,
		Caps:       caps,
		NewIPC:     true,
		NewPID:     true,
	}, nil
}

// taskUser resolves the task's user on the host (the task sees the host's
// /etc): a name or a numeric uid. A CSI plugin task defaults to root.
func taskUser(cfg *drivers.TaskConfig) (*executor.User, error) {
	name := cfg.User
	if name == "" {
		name = DefaultUser
		if cfg.Privileged {
			name = "root"
		}
	}
	u, err := user.Lookup(name)
	if err != nil {
		var uerr error
		if u, uerr = user.LookupId(name); uerr != nil {
			return nil, fmt.Errorf("task %q: user %q: %w (set the task's user to an existing user): %w",
				cfg.Name, name, err, drivers.ErrInvalidConfig)
		}
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("task %q: user %q has a non-numeric uid %q or gid %q", cfg.Name, name, u.Uid, u.Gid)
	}
	return &executor.User{Name: u.Username, UID: uint32(uid), GID: uint32(gid)}, nil
}

// depth counts the components of a clean absolute path.
func depth(p string) int { return strings.Count(p, "/") }

// bind checks one volume mount.
func bind(cfg *drivers.TaskConfig, m *drivers.MountConfig) (executor.Bind, error) {
	if m == nil {
		return executor.Bind{}, fmt.Errorf("task %q: an empty volume mount: %w", cfg.Name, drivers.ErrInvalidConfig)
	}
	bad := func(what string) (executor.Bind, error) {
		return executor.Bind{}, fmt.Errorf("task %q: volume mount of %q at %q: %s: %w",
			cfg.Name, m.HostPath, m.TaskPath, what, drivers.ErrInvalidConfig)
	}
	switch {
	case !path.IsAbs(m.HostPath):
		return bad("the host path must be absolute")
	case !path.IsAbs(m.TaskPath) || path.Clean(m.TaskPath) == "/":
		return bad("the task path must be absolute and not /")
	case path.Clean(m.TaskPath) != m.TaskPath && path.Clean(m.TaskPath)+"/" != m.TaskPath:
		return bad("the task path must be clean (no .., no //)")
	}
	switch m.PropagationMode {
	case "", executor.PropagationPrivate, executor.PropagationHostToTask, executor.PropagationBidirectional:
	default:
		return bad(fmt.Sprintf("unknown propagation mode %q: use %q, %q or %q", m.PropagationMode,
			executor.PropagationPrivate, executor.PropagationHostToTask, executor.PropagationBidirectional))
	}
	return executor.Bind{
		HostPath:    m.HostPath,
		TaskPath:    path.Clean(m.TaskPath),
		Readonly:    m.Readonly,
		Propagation: m.PropagationMode,
	}, nil
}
