package hostpath

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// CheckMountPrivileges is the default Config.CanMount: the Node service's
// bind mounts need CAP_SYS_ADMIN in the plugin's effective capability set,
// which root normally has. The error says what is missing and what to do;
// operators read it as is in the plugin's health (berth plugin status).
func CheckMountPrivileges() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		// Without an answer, trust the user ID: root can mount unless a
		// container took the capability away.
		if os.Geteuid() == 0 {
			return nil
		}
		return mountPrivilegeError(os.Geteuid())
	}
	if data[unix.CAP_SYS_ADMIN/32].Effective&(1<<(unix.CAP_SYS_ADMIN%32)) != 0 {
		return nil
	}
	return mountPrivilegeError(os.Geteuid())
}

// mountPrivilegeError explains why a process of effective user uid without
// CAP_SYS_ADMIN cannot serve volumes.
func mountPrivilegeError(uid int) error {
	if uid == 0 {
		return fmt.Errorf("hostpath: running as root but without CAP_SYS_ADMIN (an unprivileged container?): " +
			"bind mounts need it; run the Berth agent as root with CAP_SYS_ADMIN")
	}
	return fmt.Errorf("hostpath: not running as root (uid %d): bind mounts need CAP_SYS_ADMIN; "+
		"run the Berth agent as root (for a dev agent: sudo make dev)", uid)
}
