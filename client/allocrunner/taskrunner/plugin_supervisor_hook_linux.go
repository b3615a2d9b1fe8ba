package taskrunner

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/client/pluginmanager/csimanager"
)

// makeSharedMount makes dir a shared mount (binding it on itself first if
// it is not a mount point), so that mounts a plugin makes below its
// bidirectional bind of dir propagate back to the host, whatever the
// propagation of the host's own mounts. The bind stays: it is harmless,
// and the next plugin task of the same plugin finds it in place.
func makeSharedMount(dir string) error {
	mounted, err := csimanager.IsMountpoint(dir)
	if err != nil {
		return err
	}
	if !mounted {
		if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding %q on itself to share its mounts with the plugin: %w", dir, err)
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("making %q a shared mount for the plugin: %w", dir, err)
	}
	return nil
}
