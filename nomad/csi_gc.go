package nomad

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/nomad/volumewatcher"
)

// The leader's CSI reapers, one set per term (runScheduling starts them):
//
//	volumewatcher ──► claims of stopped allocs released step by step (nomad/volumewatcher)
//	claim GC      ──► every CSIClaimGCInterval: every volume with claims queued in the watcher
//	plugin GC     ──► every CSIPluginGCInterval: plugins with no instances for
//	                  CSIPluginGCThreshold (and no live claims) deleted
//
// System.GarbageCollect runs both GCs at once, plugin GC without its
// threshold. No GC here ever frees a claim: only the claim protocol does.

// csiTerm returns the current term's scheduling machinery, with its
// volumewatcher, or CodeNoLeader when this server is not running leader
// duties (yet, or any more).
func (s *Server) csiTerm() (*scheduling, error) {
	// A leader whose duties are starting (elected and caught up, the
	// term's loops not running yet) is waited for: a request that arrives
	// in that window is not the caller's problem. Any other server, or a
	// term that does not start within RaftTimeout, answers CodeNoLeader,
	// which callers retry.
	deadline := time.NewTimer(s.config.RaftTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if sc := s.sched.Load(); sc != nil && sc.volumes != nil {
			return sc, nil
		}
		if !s.IsLeader() {
			break
		}
		select {
		case <-tick.C:
			continue
		case <-deadline.C:
		case <-s.ctx.Done():
		}
		break
	}
	return nil, structs.NewError(structs.CodeNoLeader, "no cluster leader: leader duties are not running on this server; retry")
}

// newVolumeWatcher makes the term's volumewatcher.
func (s *Server) newVolumeWatcher() *volumewatcher.Watcher {
	c := s.config
	cfg := volumewatcher.Config{
		State:                     s.fsm.State,
		Writer:                    claimWriter{s},
		ControllerTimeout:         c.CSIControllerTimeout,
		DefaultDisconnectDeadline: c.CSIDisconnectDeadline,
		NodeDetachGrace:           c.CSINodeDetachGrace,
		RetryBase:                 c.CSIClaimRetryBase,
		RetryMax:                  c.CSIClaimRetryMax,
		ResyncInterval:            c.CSIVolumeWatcherResync,
		Now:                       c.CSIClock,
		Logger:                    s.logger,
	}
	cfg.Controller = s.controllers()
	cfg.NodeDetacher = s.csiControllers
	return volumewatcher.New(cfg)
}

// claimWriter commits the volumewatcher's claim steps through Raft.
type claimWriter struct{ s *Server }

func (w claimWriter) WriteClaims(ctx context.Context, updates []*structs.CSIVolumeClaimUpdate) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return w.s.writeClaims(updates...)
}

// runCSIReapers runs the term's volumewatcher and CSI GC until ctx ends.
func (s *Server) runCSIReapers(ctx context.Context, sc *scheduling) {
	var wg sync.WaitGroup
	wg.Go(func() { sc.volumes.Run(ctx) })
	wg.Go(func() { s.runCSIGC(ctx, sc) })
	wg.Wait()
}

// runCSIGC runs claim GC and plugin GC on their intervals.
func (s *Server) runCSIGC(ctx context.Context, sc *scheduling) {
	logger := s.logger.Named("csi_gc")
	claimTick := time.NewTicker(orDefault(s.config.CSIClaimGCInterval, 5*time.Minute))
	defer claimTick.Stop()
	pluginTick := time.NewTicker(orDefault(s.config.CSIPluginGCInterval, 5*time.Minute))
	defer pluginTick.Stop()
	// When this term first saw each plugin empty: a new leader waits the
	// threshold again, which only delays a deletion.
	emptySince := map[string]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-claimTick.C:
			if err := sc.volumes.EnqueueAll(); err != nil {
				logger.Warn("claim GC failed", "error", err)
			}
		case <-pluginTick.C:
			if _, err := s.gcPlugins(ctx, emptySince, false); err != nil && ctx.Err() == nil {
				logger.Warn("plugin GC failed; retrying at the next interval", "error", err)
			}
		}
	}
}

// gcPlugins deletes the plugins pluginsToGC picks, one Raft entry each,
// and returns the index of the last delete (0 if none). emptySince is
// updated in place; force ignores the threshold.
func (s *Server) gcPlugins(ctx context.Context, emptySince map[string]time.Time, force bool) (uint64, error) {
	snap, err := s.State().Snapshot()
	if err != nil {
		return 0, err
	}
	plugins, claimed, err := readPluginGCState(snap)
	if err != nil {
		return 0, err
	}
	threshold := orDefault(s.config.CSIPluginGCThreshold, time.Hour)
	now := time.Now()
	if s.config.CSIClock != nil {
		now = s.config.CSIClock()
	}
	doomed := pluginsToGC(plugins, claimed, emptySince, threshold, now, force)
	var index uint64
	var errs []error
	for _, id := range doomed {
		if err := ctx.Err(); err != nil {
			return index, err
		}
		_, idx, err := s.raftApply(structs.CSIPluginDeleteRequestType, &structs.CSIPluginDeleteRequest{ID: id})
		switch {
		case err == nil:
			index = idx
			delete(emptySince, id)
			s.logger.Info("deleted empty CSI plugin", "plugin_id", id)
		case errors.Is(err, structs.ErrNotFound), errors.Is(err, structs.ErrConflict):
			// Deleted meanwhile, or an instance came back: nothing to do.
			delete(emptySince, id)
		default:
			errs = append(errs, err)
		}
	}
	return index, errors.Join(errs...)
}

// readPluginGCState reads the plugins and the IDs of plugins whose volumes
// have live claims.
func readPluginGCState(snap *state.StateSnapshot) ([]*structs.CSIPlugin, map[string]bool, error) {
	iter, err := snap.CSIPlugins(nil)
	if err != nil {
		return nil, nil, err
	}
	var plugins []*structs.CSIPlugin
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		plugins = append(plugins, raw.(*structs.CSIPlugin))
	}
	vols, err := snap.CSIVolumes(nil, structs.AllNamespaces)
	if err != nil {
		return nil, nil, err
	}
	claimed := map[string]bool{}
	for raw := vols.Next(); raw != nil; raw = vols.Next() {
		if v := raw.(*structs.CSIVolume); len(v.Claims) > 0 {
			claimed[v.PluginID] = true
		}
	}
	return plugins, claimed, nil
}

// pluginsToGC picks the plugins to delete, sorted: those with no instance
// on any node, empty for at least threshold as emptySince has seen them
// (or at all, with force), and whose volumes hold no live claims — the
// volumewatcher still needs the plugin (ControllerRequired) to release
// them. It updates emptySince: plugins seen empty start their clock at
// now; plugins no longer empty (or gone) leave it.
func pluginsToGC(plugins []*structs.CSIPlugin, claimed map[string]bool, emptySince map[string]time.Time,
	threshold time.Duration, now time.Time, force bool) []string {
	present := map[string]bool{}
	var out []string
	for _, p := range plugins {
		present[p.ID] = true
		if !p.IsEmpty() {
			delete(emptySince, p.ID)
			continue
		}
		since, ok := emptySince[p.ID]
		if !ok {
			since = now
			if emptySince != nil {
				emptySince[p.ID] = now
			}
		}
		if !claimed[p.ID] && (force || now.Sub(since) >= threshold) {
			out = append(out, p.ID)
		}
	}
	for _, id := range slices.Collect(maps.Keys(emptySince)) {
		if !present[id] {
			delete(emptySince, id)
		}
	}
	slices.Sort(out)
	return out
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
