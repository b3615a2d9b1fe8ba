package allocrunner

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/berth-io/berth/client/pluginmanager/csimanager"
)

// What the csi_hook did with each volume is persisted in the alloc's hook
// data, step by step, before each step's side effect, so that a restarted
// client re-uses mounts instead of claiming and mounting again, and so that
// Postrun releases exactly what was taken, even after a crash halfway:
//
//	(none) ──► claiming ──Claim RPC──► mounting ──stage+publish──► mounted
//
//	Postrun:  mounting, mounted ──UnmountVolume──► unmounted ──Unpublish RPC──► (forgotten)
//	          claiming ──────────────────────────────────────Unpublish RPC──► (forgotten)
const (
	csiVolumeClaiming  = "claiming"
	csiVolumeMounting  = "mounting"
	csiVolumeMounted   = "mounted"
	csiVolumeUnmounted = "unmounted"
)

// csiHookState is the csi_hook's hook data.
type csiHookState struct {
	// Volumes by the group's volume name.
	Volumes map[string]*csiVolumeState `json:"volumes"`
}

// csiVolumeState is one volume of the alloc.
type csiVolumeState struct {
	Step string `json:"step"`
	// Source is the volume ID (per_alloc resolved).
	Source     string                  `json:"source"`
	Namespace  string                  `json:"namespace"`
	ExternalID string                  `json:"external_id,omitempty"`
	PluginID   string                  `json:"plugin_id,omitempty"`
	Usage      csimanager.UsageOptions `json:"usage"`
	// MountSource is the host path the volume is published at (mounted).
	MountSource string `json:"mount_source,omitempty"`
	IsDevice    bool   `json:"is_device,omitempty"`
}

func (s *csiVolumeState) copy() *csiVolumeState {
	if s == nil {
		return nil
	}
	out := *s
	out.Usage.MountOptions = s.Usage.MountOptions.Copy()
	return &out
}

// needsUnmount reports whether Postrun must unmount before unpublishing.
func (s *csiVolumeState) needsUnmount() bool {
	return s.Step == csiVolumeMounting || s.Step == csiVolumeMounted
}

func decodeCSIHookState(raw []byte) (*csiHookState, error) {
	st := &csiHookState{Volumes: map[string]*csiVolumeState{}}
	if len(raw) == 0 {
		return st, nil
	}
	if err := json.Unmarshal(raw, st); err != nil {
		return nil, fmt.Errorf("decoding csi hook state: %w", err)
	}
	if st.Volumes == nil {
		st.Volumes = map[string]*csiVolumeState{}
	}
	return st, nil
}

func (s *csiHookState) encode() ([]byte, error) {
	return json.Marshal(s)
}

// names returns the volume names, sorted.
func (s *csiHookState) names() []string {
	return slices.Sorted(maps.Keys(s.Volumes))
}
