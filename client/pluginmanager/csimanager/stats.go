package csimanager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/berth-io/berth/client/dynamicplugins"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi"
)

// Volume stats: every StatsInterval the Manager asks each node plugin that
// advertises GET_VOLUME_STATS for the usage (and, with VOLUME_CONDITION,
// the condition) of every volume published through it on this node, and
// hands one report for the whole node to Config.ReportStats. A volume whose
// condition turns abnormal, or whose abnormal message changes, is handed
// to Config.OnAbnormal once, with the allocs that use it.

// publishedVolume is a volume published on this node through one plugin,
// with the allocs it is published for and one of their publish paths
// (NodeGetVolumeStats needs a path the volume is published at).
type publishedVolume struct {
	pluginID, namespace, volumeID, externalID string
	staging                                   string            // host path, "" when not staged
	paths                                     map[string]string // host publish path by alloc ID
}

// publishedSet is what this client has published, in memory: a restarted
// client learns it again as its allocs' csi_hooks mount (MountVolume is
// idempotent and reuses the mount).
type publishedSet struct {
	lock sync.Mutex
	vols map[string]*publishedVolume // by volumeLockKey
}

func (s *publishedSet) add(pluginID string, vol *structs.CSIVolume, allocID, publish, staging string) {
	s.lock.Lock()
	defer s.lock.Unlock()
	if s.vols == nil {
		s.vols = map[string]*publishedVolume{}
	}
	k := volumeLockKey(pluginID, vol.Namespace, vol.ID)
	p := s.vols[k]
	if p == nil {
		p = &publishedVolume{pluginID: pluginID, namespace: vol.Namespace, volumeID: vol.ID, paths: map[string]string{}}
		s.vols[k] = p
	}
	p.externalID, p.staging = vol.RemoteID(), staging
	p.paths[allocID] = publish
}

func (s *publishedSet) remove(pluginID, namespace, volumeID, allocID string) {
	s.lock.Lock()
	defer s.lock.Unlock()
	k := volumeLockKey(pluginID, namespace, volumeID)
	if p := s.vols[k]; p != nil {
		delete(p.paths, allocID)
		if len(p.paths) == 0 {
			delete(s.vols, k)
		}
	}
}

// snapshot returns copies of the published volumes, sorted by key.
func (s *publishedSet) snapshot() []publishedVolume {
	s.lock.Lock()
	defer s.lock.Unlock()
	keys := make([]string, 0, len(s.vols))
	for k := range s.vols {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]publishedVolume, 0, len(keys))
	for _, k := range keys {
		p := *s.vols[k]
		p.paths = make(map[string]string, len(s.vols[k].paths))
		for a, path := range s.vols[k].paths {
			p.paths[a] = path
		}
		out = append(out, p)
	}
	return out
}

// runStats samples every StatsInterval until ctx ends.
func (m *Manager) runStats(ctx context.Context) {
	t := time.NewTicker(m.cfg.StatsInterval)
	defer t.Stop()
	abnormal := map[string]string{} // condition message by volume key, while abnormal
	reported := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		samples := m.sampleStats(ctx, abnormal)
		// An empty report is sent once, so the servers drop this node's
		// samples when its last volume is unpublished.
		if len(samples) == 0 && !reported {
			continue
		}
		if err := m.cfg.ReportStats(ctx, samples); err != nil {
			m.logger.Debug("reporting volume stats failed; the next interval reports again", "error", err)
			continue
		}
		reported = len(samples) > 0
	}
}

// SampleStats asks the node plugins for the stats of every volume
// published on this node, as runStats does each interval (tests call it
// directly).
func (m *Manager) SampleStats(ctx context.Context) []*structs.CSIVolumeStatsSample {
	return m.sampleStats(ctx, map[string]string{})
}

func (m *Manager) sampleStats(ctx context.Context, abnormal map[string]string) []*structs.CSIVolumeStatsSample {
	var out []*structs.CSIVolumeStatsSample
	caps := map[string]*csi.NodeCapabilitySet{}
	seen := map[string]bool{}
	for _, p := range m.published.snapshot() {
		m.lock.Lock()
		inst := m.instances[instanceKey{dynamicplugins.PluginTypeCSINode, p.pluginID}]
		m.lock.Unlock()
		if inst == nil {
			continue
		}
		nc, ok := caps[p.pluginID]
		if !ok {
			var err error
			if nc, err = inst.client.NodeGetCapabilities(ctx); err != nil {
				inst.logger.Debug("reading node capabilities for volume stats failed", "error", err)
			}
			caps[p.pluginID] = nc
		}
		if nc == nil || !nc.GetVolumeStats {
			continue
		}
		var allocs []string
		for a := range p.paths {
			allocs = append(allocs, a)
		}
		slices.Sort(allocs)
		req := &csi.NodeGetVolumeStatsRequest{ExternalID: p.externalID}
		var err error
		if req.VolumePath, err = inst.paths.PluginPath(p.paths[allocs[0]]); err != nil {
			continue
		}
		if p.staging != "" {
			if req.StagingTargetPath, err = inst.paths.PluginPath(p.staging); err != nil {
				continue
			}
		}
		vs, err := inst.client.NodeGetVolumeStats(ctx, req)
		if err != nil {
			inst.logger.Debug("NodeGetVolumeStats failed", "volume_id", p.volumeID, "namespace", p.namespace, "error", err)
			continue
		}
		st := statsFrom(vs, nc.VolumeCondition)
		out = append(out, &structs.CSIVolumeStatsSample{Namespace: p.namespace, VolumeID: p.volumeID, Stats: st})

		key := volumeLockKey(p.pluginID, p.namespace, p.volumeID)
		seen[key] = true
		switch c := st.Condition; {
		case c != nil && c.Abnormal:
			if prev, was := abnormal[key]; !was || prev != c.Message {
				abnormal[key] = c.Message
				m.cfg.OnAbnormal(allocs, p.namespace, p.volumeID, c.Message)
			}
		default:
			delete(abnormal, key)
		}
	}
	for k := range abnormal {
		if !seen[k] {
			delete(abnormal, k)
		}
	}
	return out
}

// statsFrom turns the plugin's answer into a sample; a unit it did not
// report stays -1.
func statsFrom(vs *csi.VolumeStats, withCondition bool) *structs.CSIVolumeStats {
	st := &structs.CSIVolumeStats{
		UsedBytes: -1, AvailableBytes: -1, TotalBytes: -1, UsedInodes: -1, AvailableInodes: -1,
		SampledAt: time.Now().UnixNano(),
	}
	for _, u := range vs.Usage {
		switch u.Unit {
		case "bytes", "":
			st.UsedBytes, st.AvailableBytes, st.TotalBytes = u.Used, u.Available, u.Total
		case "inodes":
			st.UsedInodes, st.AvailableInodes = u.Used, u.Available
		}
	}
	if withCondition && vs.Condition != nil {
		st.Condition = &structs.CSIVolumeCondition{Abnormal: vs.Condition.Abnormal, Message: vs.Condition.Message}
	}
	return st
}

// ErrNotPublished is returned by ExpandVolume for a volume this node does
// not publish: there is nothing to expand here.
var ErrNotPublished = errors.New("volume is not published on this node")

// ExpandVolume grows the file system of a volume published on this node
// (NodeExpandVolume at one of its publish paths, with its staging path),
// under the volume's lock. It returns the size the plugin reported.
func (v *volumeManager) ExpandVolume(ctx context.Context, namespace, volumeID, externalID string, minBytes, maxBytes int64, secrets structs.CSISecrets) (int64, error) {
	unlock, err := v.locks.Lock(ctx, volumeLockKey(v.pluginID, namespace, volumeID))
	if err != nil {
		return 0, err
	}
	defer unlock()
	var pv *publishedVolume
	for _, p := range v.published.snapshot() {
		if p.pluginID == v.pluginID && p.namespace == namespace && p.volumeID == volumeID {
			pv = &p
		}
	}
	if pv == nil {
		return 0, fmt.Errorf("expanding volume %q with plugin %q: %w", volumeID, v.pluginID, ErrNotPublished)
	}
	var allocs []string
	for a := range pv.paths {
		allocs = append(allocs, a)
	}
	slices.Sort(allocs)
	req := &csi.NodeExpandVolumeRequest{
		ExternalID: externalID, CapacityRange: &csi.CapacityRange{RequiredBytes: minBytes, LimitBytes: maxBytes}, Secrets: secrets,
	}
	if req.VolumePath, err = v.paths.PluginPath(pv.paths[allocs[0]]); err != nil {
		return 0, err
	}
	if pv.staging != "" {
		if req.StagingTargetPath, err = v.paths.PluginPath(pv.staging); err != nil {
			return 0, err
		}
	}
	resp, err := v.client.NodeExpandVolume(ctx, req)
	if err != nil {
		return 0, fmt.Errorf("expanding volume %q with plugin %q: %w", volumeID, v.pluginID, err)
	}
	return resp.CapacityBytes, nil
}
