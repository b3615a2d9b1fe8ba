// Package shared holds what alloc hooks hand to task hooks. It is a leaf
// so that both allocrunner and taskrunner can import it.
package shared

import (
	"maps"
	"sync"
)

// HookResources is the one place alloc hooks put data for task hooks. The
// alloc runner creates one per alloc and gives it to every hook. Prerun
// hooks (e.g. csi_hook) set values before any task starts; task prestart
// hooks (e.g. volume_mount) read them. Getters return copies, so callers
// may keep and change what they get.
type HookResources struct {
	// lock guards csiMounts.
	lock      sync.RWMutex
	csiMounts map[string]*CSIMount
}

// CSIMount is a CSI volume published for this alloc, ready to be bound
// into tasks.
type CSIMount struct {
	// VolumeID and PluginID name the volume for messages.
	VolumeID string
	PluginID string
	// Source is the host path the volume is published at.
	Source   string
	ReadOnly bool
	// IsDevice is set for block volumes (Source is a device node).
	IsDevice bool
}

// NewHookResources returns an empty set.
func NewHookResources() *HookResources {
	return &HookResources{csiMounts: map[string]*CSIMount{}}
}

// SetCSIMounts replaces the CSI mounts, keyed by the group's volume name.
func (r *HookResources) SetCSIMounts(m map[string]*CSIMount) {
	c := copyMounts(m)
	r.lock.Lock()
	defer r.lock.Unlock()
	r.csiMounts = c
}

// GetCSIMounts returns a copy of the CSI mounts, keyed by volume name.
func (r *HookResources) GetCSIMounts() map[string]*CSIMount {
	r.lock.RLock()
	defer r.lock.RUnlock()
	return copyMounts(r.csiMounts)
}

func copyMounts(in map[string]*CSIMount) map[string]*CSIMount {
	out := make(map[string]*CSIMount, len(in))
	for k, m := range maps.All(in) {
		if m == nil {
			continue
		}
		mm := *m
		out[k] = &mm
	}
	return out
}
