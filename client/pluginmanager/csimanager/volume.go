package csimanager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/helper/crashpoint"
	"github.com/berth-io/berth/helper/keylock"
	"github.com/berth-io/berth/helper/simbug"
	"github.com/berth-io/berth/helper/steptrace"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi"
)

// VolumeManager stages and publishes volumes on this node through one node
// plugin. Its methods are safe for concurrent use; operations on one volume
// run one at a time (across every VolumeManager of the Manager), waiting
// for each other with ctx. Both are idempotent: a repeated MountVolume
// returns the same mount, a repeated UnmountVolume succeeds.
type VolumeManager interface {
	// PluginID is the plugin's ID.
	PluginID() string
	// ExternalNodeID is the plugin's ID of this node (NodeGetInfo), which
	// a claim carries to the controller.
	ExternalNodeID() string
	// MountVolume makes vol available to alloc at its publish path:
	// NodeStage when the plugin advertises STAGE_UNSTAGE_VOLUME and no other
	// alloc on this node uses (vol, usage) yet, then NodePublish unless the
	// publish path is already a mount point (a mount left by an earlier
	// attempt is reused). The plugin's capabilities are read again after
	// it restarted: a plugin upgraded in place may have gained or lost
	// staging.
	// publishContext comes from the claim (ControllerPublish).
	MountVolume(ctx context.Context, vol *structs.CSIVolume, alloc *structs.Allocation, usage *UsageOptions, publishContext map[string]string) (*MountInfo, error)
	// UnmountVolume undoes MountVolume for one alloc: NodeUnpublish, then
	// NodeUnstage if no other alloc on this node uses (vol, usage) and the
	// plugin stages now or staged it then. An error leaves enough recorded
	// to try again.
	UnmountVolume(ctx context.Context, vol VolumeRef, allocID string, usage *UsageOptions) error
	// PrepareMount makes ahead of MountVolume the directories it would
	// make: the publish path's parent and, when the plugin is known to
	// stage, the staging path. The CSI hook calls it while the Claim RPC
	// is in flight, so that MountVolume finds them: creating them cost
	// ~0.7 ms of the claim path (issue 20's step trace; a mkdir on a file
	// system whose inodes churn is 50–150 µs). Best effort: MountVolume
	// makes whatever is missing. Call DiscardPrepared if MountVolume will
	// not be called for the alloc after all.
	PrepareMount(ctx context.Context, vol VolumeRef, allocID string, usage *UsageOptions) error
	// DiscardPrepared removes what PrepareMount made, if it is still empty
	// and unused.
	DiscardPrepared(vol VolumeRef, allocID string, usage *UsageOptions)
}

// MountInfo is a volume published for an alloc.
type MountInfo struct {
	// Source is the host path the volume is published at.
	Source string
	// IsDevice is set for block volumes: Source is a device node.
	IsDevice bool
}

// VolumeRef names a volume for UnmountVolume.
type VolumeRef struct {
	Namespace string
	ID        string
	// ExternalID is the plugin's ID of the volume; ID when empty.
	ExternalID string
}

func (r VolumeRef) remoteID() string {
	if r.ExternalID != "" {
		return r.ExternalID
	}
	return r.ID
}

// dirMode is the mode of the directories the client creates for staging
// and publishing: others may traverse them (a task running as another user
// reaches its volume), not list them.
const dirMode = 0o711

// volumeManager implements VolumeManager for one node plugin instance.
type volumeManager struct {
	pluginID       string
	externalNodeID string
	client         csi.Client
	paths          Paths
	usage          usageStore
	locks          *keylock.Locks[string]
	isMountpoint   func(string) (bool, error)
	logger         hclog.Logger
	// published records what is published, for volume stats.
	published *publishedSet
	// caps is what stages last learned, or nil.
	caps atomic.Pointer[stagingCaps]
}

// stagingCaps is whether the plugin stages, as it said over connection
// conn.
type stagingCaps struct {
	conn   uint64
	stages bool
}

// stages says whether the plugin stages volumes. The answer read over the
// connection still in use is reused (from the fingerprint or an earlier
// call): a plugin's capabilities change only when its process does, and a
// restarted plugin task (perhaps a new version under the same
// registration) is only reached through a new connection, so then, or
// while no connection is up, the plugin is asked again first. Asking at
// every mount and unmount cost a plugin round trip on the claim path.
func (v *volumeManager) stages(ctx context.Context) (bool, error) {
	conn := v.client.Connection()
	if c := v.caps.Load(); c != nil && conn != 0 && c.conn == conn {
		return c.stages, nil
	}
	caps, err := v.client.NodeGetCapabilities(ctx)
	if err != nil {
		return false, fmt.Errorf("reading the node plugin's capabilities: %w", err)
	}
	v.learn(conn, caps)
	return caps.StageUnstageVolume, nil
}

// learn records what the plugin said about itself over connection conn,
// read before the call was made, when that connection was still up after
// it: then the answer certainly came over it.
func (v *volumeManager) learn(conn uint64, caps *csi.NodeCapabilitySet) {
	if conn != 0 && v.client.Connection() == conn {
		v.caps.Store(&stagingCaps{conn: conn, stages: caps.StageUnstageVolume})
	}
}

var _ VolumeManager = (*volumeManager)(nil)

func (v *volumeManager) PluginID() string       { return v.pluginID }
func (v *volumeManager) ExternalNodeID() string { return v.externalNodeID }

func volumeLockKey(pluginID, namespace, volumeID string) string {
	return strings.Join([]string{pluginID, namespace, volumeID}, "/")
}

func (v *volumeManager) MountVolume(ctx context.Context, vol *structs.CSIVolume, alloc *structs.Allocation, usage *UsageOptions, publishContext map[string]string) (*MountInfo, error) {
	mi, err := v.mountVolume(ctx, vol, alloc.ID, usage, publishContext)
	if err != nil {
		return nil, fmt.Errorf("mounting volume %q for alloc %s with plugin %q: %w", vol.ID, alloc.ID, v.pluginID, err)
	}
	return mi, nil
}

func (v *volumeManager) mountVolume(ctx context.Context, vol *structs.CSIVolume, allocID string, usage *UsageOptions, publishContext map[string]string) (*MountInfo, error) {
	if err := usage.validate(); err != nil {
		return nil, err
	}
	staging, err := v.paths.StagingPath(vol.Namespace, vol.ID, usage)
	if err != nil {
		return nil, err
	}
	publish, err := v.paths.PublishPath(allocID, vol.ID, usage)
	if err != nil {
		return nil, err
	}
	logger := v.logger.With("volume_id", vol.ID, "namespace", vol.Namespace, "alloc_id", allocID, "usage", usage.Name())
	unlock, err := v.locks.Lock(ctx, volumeLockKey(v.pluginID, vol.Namespace, vol.ID))
	if err != nil {
		return nil, err
	}
	var info *MountInfo
	err = fenced(ctx, unlock, func(callCtx context.Context) error {
		var err error
		info, err = v.mountLocked(ctx, callCtx, vol, allocID, usage, publishContext, staging, publish, logger)
		return err
	})
	if err != nil {
		return nil, err
	}
	return info, nil
}

// fenced runs body, which calls the plugin about one volume, holding that
// volume's lock until body returns (then it calls unlock), and returns
// body's error, or ctx's as soon as ctx ends. body makes its plugin calls
// under callCtx, which does not end with ctx, and checks ctx before each.
//
// Why: a plugin call whose caller gave up is not over at the plugin. The
// gRPC client returns at once when ctx ends, but the plugin may still be
// inside NodeStage or NodePublish, and finish it later. Were the lock
// released then, the alloc's release would NodeUnpublish (and the servers
// free the claim) before that publish lands, leaving the volume published
// on a node that holds no claim, and on a second node once another alloc
// claims it (the simulator's check-1 reports, seed 41155 among them). CSI
// asks the CO for at most one call in flight per volume; the lock keeps
// that promise only while it covers the call until the plugin answered
// or the call's per-attempt deadline ended it. The caller still returns
// at once, so a stopped alloc or a client shutdown never waits on a hung
// plugin; what waits is the next operation on the volume. Only the attempt
// under way is waited for: once ctx ends, callCtx lets the csi client start
// no retry (csi.WithRetriesUntil), which would hold the volume up to every
// attempt's timeout for a caller that has gone.
func fenced(ctx context.Context, unlock func(), body func(callCtx context.Context) error) error {
	if simbug.On(simbug.UnfencedVolumeCall) {
		defer unlock()
		return body(ctx)
	}
	done := make(chan error, 1)
	go func() {
		defer unlock()
		done <- body(csi.WithRetriesUntil(context.WithoutCancel(ctx), ctx.Done()))
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// mountLocked is mountVolume under the volume's lock (see fenced): plugin
// calls under callCtx, ctx checked before each.
func (v *volumeManager) mountLocked(ctx, callCtx context.Context, vol *structs.CSIVolume, allocID string, usage *UsageOptions,
	publishContext map[string]string, staging, publish string, logger hclog.Logger) (*MountInfo, error) {
	staged, err := v.stages(callCtx)
	if err != nil {
		return nil, err
	}

	capability := csi.CapabilityFor(usage.AccessMode, usage.AttachmentMode, vol.MountOptions.Merge(usage.MountOptions))
	pluginStaging := ""
	if staged {
		key := usageKey(v.pluginID, vol.Namespace, vol.ID, usage)
		rec, err := v.usage.get(key)
		if err != nil {
			return nil, err
		}
		// Record this alloc as a user before staging: a client that dies
		// after NodeStage then leaves a user whose postrun unstages, never a
		// staged volume that nobody accounts for.
		rec = rec.with(allocID)
		if err := v.usage.put(key, rec); err != nil {
			return nil, err
		}
		if pluginStaging, err = v.paths.PluginPath(staging); err != nil {
			return nil, err
		}
		if rec.Staged {
			logger.Debug("volume already staged on this node; reusing the staging", "allocs", rec.Allocs)
		} else {
			if err := os.MkdirAll(staging, dirMode); err != nil {
				return nil, fmt.Errorf("creating staging path: %w", err)
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			steptrace.Mark(allocID, steptrace.StageSent)
			err := v.client.NodeStageVolume(callCtx, &csi.NodeStageVolumeRequest{
				ExternalID: vol.RemoteID(), PublishContext: publishContext, StagingTargetPath: pluginStaging,
				VolumeCapability: capability, Secrets: vol.Secrets, VolumeContext: vol.Context,
			})
			if err != nil {
				return nil, fmt.Errorf("staging at %q: %w", staging, err)
			}
			crashpoint.Hit(crashpoint.CSIStaged)
			steptrace.Mark(allocID, steptrace.Staged)
			rec.Staged = true
			if err := v.usage.put(key, rec); err != nil {
				return nil, err
			}
			logger.Debug("staged volume", "path", staging)
		}
	}

	info := &MountInfo{Source: publish, IsDevice: usage.AttachmentMode == structs.CSIVolumeAttachmentModeBlockDevice}
	mounted, err := v.isMountpoint(publish)
	if err != nil {
		return nil, err
	}
	hostStaging := ""
	if staged {
		hostStaging = staging
	}
	if mounted {
		logger.Debug("volume already published for this alloc; reusing the mount", "path", publish)
		v.published.add(v.pluginID, vol, allocID, publish, hostStaging)
		return info, nil
	}
	// The CO makes the target's parent; the plugin makes the target.
	if err := os.MkdirAll(filepath.Dir(publish), dirMode); err != nil {
		return nil, fmt.Errorf("creating the parent of the publish path: %w", err)
	}
	pluginPublish, err := v.paths.PluginPath(publish)
	if err != nil {
		return nil, err
	}
	// The caller gone, do not start publishing: the release that follows
	// undoes what was staged.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	steptrace.Mark(allocID, steptrace.PublishSent)
	err = v.client.NodePublishVolume(callCtx, &csi.NodePublishVolumeRequest{
		ExternalID: vol.RemoteID(), PublishContext: publishContext, StagingTargetPath: pluginStaging,
		TargetPath: pluginPublish, VolumeCapability: capability, ReadOnly: usage.ReadOnly,
		Secrets: vol.Secrets, VolumeContext: vol.Context,
	})
	if err != nil {
		return nil, fmt.Errorf("publishing at %q: %w", publish, err)
	}
	logger.Debug("published volume", "path", publish)
	v.published.add(v.pluginID, vol, allocID, publish, hostStaging)
	return info, nil
}

// discardWait bounds DiscardPrepared's wait for the volume's lock: a
// volume busy that long is in use, and its next unstage removes an empty
// staging path anyway.
const discardWait = time.Second

func (v *volumeManager) PrepareMount(ctx context.Context, vol VolumeRef, allocID string, usage *UsageOptions) error {
	if err := usage.validate(); err != nil {
		return err
	}
	publish, err := v.paths.PublishPath(allocID, vol.ID, usage)
	if err != nil {
		return err
	}
	// The publish path's parent is this alloc's alone: no other operation
	// creates or removes it.
	if err := os.MkdirAll(filepath.Dir(publish), dirMode); err != nil {
		return fmt.Errorf("creating the parent of the publish path: %w", err)
	}
	// Only what the plugin said over the connection still up: asking it
	// would put a plugin round trip beside the claim for a guess.
	c := v.caps.Load()
	if c == nil || !c.stages || c.conn != v.client.Connection() {
		return nil
	}
	staging, err := v.paths.StagingPath(vol.Namespace, vol.ID, usage)
	if err != nil {
		return err
	}
	// Under the volume's lock: another alloc's unstage removes the
	// staging path's empty directories under it.
	unlock, err := v.locks.Lock(ctx, volumeLockKey(v.pluginID, vol.Namespace, vol.ID))
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.MkdirAll(staging, dirMode); err != nil {
		return fmt.Errorf("creating staging path: %w", err)
	}
	return nil
}

func (v *volumeManager) DiscardPrepared(vol VolumeRef, allocID string, usage *UsageOptions) {
	if usage.validate() != nil {
		return
	}
	if publish, err := v.paths.PublishPath(allocID, vol.ID, usage); err == nil {
		if err := removeEmptyDirs(filepath.Dir(publish), filepath.Join(v.paths.HostDir, perAllocDirName)); err != nil {
			v.logger.Warn("removing the alloc's empty publish directories failed", "alloc_id", allocID, "volume_id", vol.ID, "error", err)
		}
	}
	staging, err := v.paths.StagingPath(vol.Namespace, vol.ID, usage)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), discardWait)
	defer cancel()
	unlock, err := v.locks.Lock(ctx, volumeLockKey(v.pluginID, vol.Namespace, vol.ID))
	if err != nil {
		return
	}
	defer unlock()
	// A staging path some alloc uses (or stages) is theirs to remove.
	if rec, err := v.usage.get(usageKey(v.pluginID, vol.Namespace, vol.ID, usage)); err != nil || len(rec.Allocs) > 0 {
		return
	}
	if err := removeEmptyDirs(staging, filepath.Join(v.paths.HostDir, stagingDirName)); err != nil {
		v.logger.Warn("removing empty staging directories failed", "volume_id", vol.ID, "error", err)
	}
}

func (v *volumeManager) UnmountVolume(ctx context.Context, vol VolumeRef, allocID string, usage *UsageOptions) error {
	if err := v.unmountVolume(ctx, vol, allocID, usage); err != nil {
		return fmt.Errorf("unmounting volume %q for alloc %s with plugin %q: %w", vol.ID, allocID, v.pluginID, err)
	}
	return nil
}

func (v *volumeManager) unmountVolume(ctx context.Context, vol VolumeRef, allocID string, usage *UsageOptions) error {
	staging, err := v.paths.StagingPath(vol.Namespace, vol.ID, usage)
	if err != nil {
		return err
	}
	publish, err := v.paths.PublishPath(allocID, vol.ID, usage)
	if err != nil {
		return err
	}
	logger := v.logger.With("volume_id", vol.ID, "namespace", vol.Namespace, "alloc_id", allocID, "usage", usage.Name())
	unlock, err := v.locks.Lock(ctx, volumeLockKey(v.pluginID, vol.Namespace, vol.ID))
	if err != nil {
		return err
	}
	return fenced(ctx, unlock, func(callCtx context.Context) error {
		return v.unmountLocked(ctx, callCtx, vol, allocID, usage, staging, publish, logger)
	})
}

// unmountLocked is unmountVolume under the volume's lock (see fenced):
// plugin calls under callCtx, ctx checked before each.
func (v *volumeManager) unmountLocked(ctx, callCtx context.Context, vol VolumeRef, allocID string, usage *UsageOptions,
	staging, publish string, logger hclog.Logger) error {
	pluginPublish, err := v.paths.PluginPath(publish)
	if err != nil {
		return err
	}
	// NotFound means already unpublished: the wrapper returns nil for it.
	if err := v.client.NodeUnpublishVolume(callCtx, &csi.NodeUnpublishVolumeRequest{ExternalID: vol.remoteID(), TargetPath: pluginPublish}); err != nil {
		return fmt.Errorf("unpublishing from %q: %w", publish, err)
	}
	crashpoint.Hit(crashpoint.CSIUnpublished)
	v.published.remove(v.pluginID, vol.Namespace, vol.ID, allocID)
	if err := removeEmptyDirs(publish, filepath.Join(v.paths.HostDir, perAllocDirName)); err != nil {
		logger.Warn("removing the alloc's empty publish directories failed", "error", err)
	}
	logger.Debug("unpublished volume", "path", publish)

	key := usageKey(v.pluginID, vol.Namespace, vol.ID, usage)
	rec, err := v.usage.get(key)
	if err != nil {
		return err
	}
	others := rec.others(allocID)
	if len(others) > 0 {
		logger.Debug("volume still used by other allocs on this node; leaving it staged", "other_allocs", others)
		return v.usage.put(key, &usageRecord{Allocs: others, Staged: rec.Staged})
	}
	stages, err := v.stages(callCtx)
	if err != nil {
		return err
	}
	// Unstage what this client staged even if the plugin no longer says it
	// stages (an upgrade dropped the capability): the spec pairs every
	// NodeStage with a NodeUnstage, and skipping it would leave the staging
	// mounted for good. A plugin that now answers Unimplemented leaves the
	// release pending with that error for an operator to see.
	if rec.Staged && !stages {
		logger.Warn("the node plugin no longer advertises STAGE_UNSTAGE_VOLUME but staged this volume; unstaging it anyway")
	}
	if stages || rec.Staged {
		pluginStaging, err := v.paths.PluginPath(staging)
		if err != nil {
			return err
		}
		// The record keeps this alloc until NodeUnstage succeeded, so a
		// failure is retried rather than forgotten; and it no longer says
		// staged, so an alloc mounting meanwhile stages again rather than
		// trust a half-torn-down staging.
		if rec.Staged {
			if err := v.usage.put(key, &usageRecord{Allocs: rec.Allocs}); err != nil {
				return err
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := v.client.NodeUnstageVolume(callCtx, &csi.NodeUnstageVolumeRequest{ExternalID: vol.remoteID(), StagingTargetPath: pluginStaging}); err != nil {
			return fmt.Errorf("unstaging from %q: %w", staging, err)
		}
		crashpoint.Hit(crashpoint.CSIUnstaged)
		if err := removeEmptyDirs(staging, filepath.Join(v.paths.HostDir, stagingDirName)); err != nil {
			logger.Warn("removing empty staging directories failed", "error", err)
		}
		logger.Debug("unstaged volume", "path", staging)
	}
	if len(rec.Allocs) == 0 {
		// No record (a record without allocs is never stored): nothing
		// to delete, and deleting costs a client state commit on the
		// release path of every plugin that does not stage.
		return nil
	}
	return v.usage.put(key, &usageRecord{})
}
