package executor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// restrict applies the spec's user, capability bounding set and IPC
// namespace to cmd (with NewPID, init drops the bounding set instead). It runs on the executor's locked thread, after
// isolate: the bounding set is per thread and inherited by the task
// forked from it, while the executor keeps the capabilities it needs
// (chroot, setuid) until the task's execve.
func restrict(spec *Spec, cmd *exec.Cmd) error {
	if spec.NewIPC {
		cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWIPC
	}
	if u := spec.User; u != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
		if spec.Isolation != nil {
			for _, d := range spec.Isolation.OwnDirs {
				p := filepath.Join(spec.Isolation.Root, filepath.Clean("/"+d))
				if err := os.Lchown(p, int(u.UID), int(u.GID)); err != nil && !os.IsNotExist(err) {
					return fmt.Errorf("giving %s to user %q: %w", d, u.Name, err)
				}
			}
		}
	}
	if spec.Caps == nil {
		return nil
	}
	if spec.NewPID {
		// init drops them: it needs sys_admin for the task's /proc, and
		// as root it holds after execve only what the bounding set has.
		_, err := capSet(spec.Caps)
		return err
	}
	return dropCaps(spec.Caps)
}

// capSet maps capability names to numbers.
func capSet(names []string) (map[int]bool, error) {
	keep := map[int]bool{}
	for _, name := range names {
		c, ok := CapabilityByName(name)
		if !ok {
			return nil, fmt.Errorf("unknown capability %q", name)
		}
		keep[c] = true
	}
	return keep, nil
}

// dropCaps drops from the calling thread's bounding set every capability
// not named in keep.
func dropCaps(names []string) error {
	keep, err := capSet(names)
	if err != nil {
		return err
	}
	last, err := lastCap()
	if err != nil {
		return err
	}
	for c := 0; c <= last; c++ {
		if keep[c] {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("dropping capability %d from the task's bounding set: %w", c, err)
		}
	}
	return nil
}

// lastCap is the highest capability this kernel knows.
func lastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("reading the last capability: %w", err)
	}
	var n int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &n); err != nil {
		return 0, fmt.Errorf("reading the last capability: %w", err)
	}
	return n, nil
}

// capNames are the Linux capabilities by number (capability.h).
var capNames = []string{
	"chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill", "setgid", "setuid",
	"setpcap", "linux_immutable", "net_bind_service", "net_broadcast", "net_admin", "net_raw",
	"ipc_lock", "ipc_owner", "sys_module", "sys_rawio", "sys_chroot", "sys_ptrace", "sys_pacct",
	"sys_admin", "sys_boot", "sys_nice", "sys_resource", "sys_time", "sys_tty_config", "mknod",
	"lease", "audit_write", "audit_control", "setfcap", "mac_override", "mac_admin", "syslog",
	"wake_alarm", "block_suspend", "audit_read", "perfmon", "bpf", "checkpoint_restore",
}

// CapabilityByName maps "sys_admin" (or "CAP_SYS_ADMIN") to its number.
func CapabilityByName(name string) (int, bool) {
	n := strings.TrimPrefix(strings.ToLower(name), "cap_")
	for i, c := range capNames {
		if c == n {
			return i, true
		}
	}
	return 0, false
}
