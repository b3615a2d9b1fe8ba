package csimanager

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/berth-io/berth/client/state"
)

// Staging usage: which allocs use each staged (volume, usage) on this node.
// It decides when NodeUnstage is safe, so it lives in the client state
// (state.BucketCSIUsage, in its node-local file: a reboot ends the
// stagings with it), not in memory: a restarted client must never
// unstage a volume that another alloc still uses (DESIGN.md §4 guarantee
// 4). Reads and writes happen under the volume's operation lock.

// usageRecord is one staged (volume, usage), keyed by usageKey.
type usageRecord struct {
	// Allocs use the staging (or are setting it up, or tearing it down).
	Allocs []string `json:"allocs"`
	// Staged is set once NodeStage succeeded; until then a new user stages
	// again (NodeStage is idempotent) rather than trust a failed attempt.
	Staged bool `json:"staged,omitempty"`
}

func usageKey(pluginID, namespace, volumeID string, u *UsageOptions) string {
	return strings.Join([]string{pluginID, namespace, volumeID, u.Name()}, "/")
}

// usageStore reads and writes usage records.
type usageStore struct {
	db state.DB
}

func (s usageStore) get(key string) (*usageRecord, error) {
	raw, err := s.db.Get(state.BucketCSIUsage, key)
	if err != nil {
		return nil, fmt.Errorf("reading staging usage %q: %w", key, err)
	}
	rec := &usageRecord{}
	if raw == nil {
		return rec, nil
	}
	if err := json.Unmarshal(raw, rec); err != nil {
		return nil, fmt.Errorf("reading staging usage %q: %w", key, err)
	}
	return rec, nil
}

func (s usageStore) put(key string, rec *usageRecord) error {
	var err error
	if len(rec.Allocs) == 0 {
		err = s.db.Delete(state.BucketCSIUsage, key)
	} else {
		var raw []byte
		if raw, err = json.Marshal(rec); err == nil {
			err = s.db.Put(state.BucketCSIUsage, key, raw)
		}
	}
	if err != nil {
		return fmt.Errorf("writing staging usage %q: %w", key, err)
	}
	return nil
}

// others returns the allocs other than allocID that use the record.
func (r *usageRecord) others(allocID string) []string {
	return slices.DeleteFunc(slices.Clone(r.Allocs), func(id string) bool { return id == allocID })
}

// with returns a copy with allocID added (once).
func (r *usageRecord) with(allocID string) *usageRecord {
	out := &usageRecord{Allocs: slices.Clone(r.Allocs), Staged: r.Staged}
	if !slices.Contains(out.Allocs, allocID) {
		out.Allocs = append(out.Allocs, allocID)
		slices.Sort(out.Allocs)
	}
	return out
}
