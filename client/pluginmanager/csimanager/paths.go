package csimanager

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/berth-io/berth/nomad/structs"
)

// Host paths (DESIGN.md §4). The client owns them; a plugin sees the same
// directory tree under its own base (see Paths.PluginPath):
//
//	<root>/<plugin_id>/staging/<namespace>/<volume_id>/<usage>
//	<root>/<plugin_id>/per-alloc/<alloc_id>/<volume_id>/<usage>
//
// where <root> is <data_dir>/client/csi. A mount is thus recognisable from
// its path alone.
const (
	stagingDirName  = "staging"
	perAllocDirName = "per-alloc"
)

// UsageOptions is how an alloc uses a volume. Its Name is part of the
// staging and publish paths, and allocs with the same usage of a volume
// share its staging.
type UsageOptions struct {
	ReadOnly       bool
	AttachmentMode structs.CSIVolumeAttachmentMode
	AccessMode     structs.CSIVolumeAccessMode
	// MountOptions are passed to the plugin; they do not change the Name.
	MountOptions *structs.CSIMountOptions
}

// Name is "<ro|rw>-<attachment mode>-<access mode>", e.g.
// "rw-file-system-single-node-writer".
func (u *UsageOptions) Name() string {
	rw := "rw"
	if u.ReadOnly {
		rw = "ro"
	}
	return rw + "-" + string(u.AttachmentMode) + "-" + string(u.AccessMode)
}

func (u *UsageOptions) validate() error {
	if !u.AccessMode.Valid() || !u.AttachmentMode.Valid() {
		return fmt.Errorf("usage %q: access mode %q and attachment mode %q must both be valid", u.Name(), u.AccessMode, u.AttachmentMode)
	}
	return nil
}

// Paths computes one plugin's host paths and translates them to the paths
// the plugin sees.
type Paths struct {
	// HostDir is <root>/<plugin_id> on the host.
	HostDir string
	// PluginDir is the same directory as the plugin sees it: its
	// stage_publish_base_dir when the plugin runs in its own mount
	// namespace (exec), or HostDir when it sees the host's (raw_exec,
	// in-process plugins).
	PluginDir string
}

// StagingPath is where (volume, usage) is staged on this node.
func (p Paths) StagingPath(namespace, volumeID string, u *UsageOptions) (string, error) {
	if err := pathElements(namespace, volumeID); err != nil {
		return "", err
	}
	return filepath.Join(p.HostDir, stagingDirName, namespace, volumeID, u.Name()), nil
}

// PublishPath is where a volume is published for one alloc.
func (p Paths) PublishPath(allocID, volumeID string, u *UsageOptions) (string, error) {
	if err := pathElements(allocID, volumeID); err != nil {
		return "", err
	}
	return filepath.Join(p.HostDir, perAllocDirName, allocID, volumeID, u.Name()), nil
}

// AllocDir is the directory holding every publish path of an alloc.
func (p Paths) AllocDir(allocID string) string {
	return filepath.Join(p.HostDir, perAllocDirName, allocID)
}

// PluginPath translates a host path under HostDir to the plugin's view.
func (p Paths) PluginPath(hostPath string) (string, error) {
	rel, err := filepath.Rel(p.HostDir, hostPath)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("path %q is not under the plugin's directory %q", hostPath, p.HostDir)
	}
	return filepath.Join(p.PluginDir, rel), nil
}

// pathElements checks that IDs can each name one directory: no '/', no
// NUL, not "." or "..", not empty. Volume IDs such as "db[0]" are fine.
func pathElements(ids ...string) error {
	for _, id := range ids {
		if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\x00") {
			return fmt.Errorf("%q cannot name a directory: IDs used in CSI paths must not be empty, \".\" or \"..\", nor contain '/'", id)
		}
	}
	return nil
}

// ValidPluginID reports whether a plugin ID can name its host directory.
func ValidPluginID(id string) error { return pathElements(id) }
