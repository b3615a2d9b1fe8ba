package hostpath

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NodePublishVolume bind-mounts the volume on the target path, creating
// the target directory if needed (for the block access type, a loop device
// of the volume's image on a target file: see block.go). Read-only when
// asked, when the access mode is reader-only, or when the volume was
// controller-published read-only.
//
// The source of the bind is the staging path when the volume is staged
// there, and the volume directory itself otherwise. With Config.Stage the
// plugin advertises STAGE_UNSTAGE_VOLUME and a CO that skips the stage gets
// FailedPrecondition (the spec's "staging target path not set"); without
// it, the publish makes the checks NodeStageVolume would have made (the
// access mode across nodes, the controller publish to this node, the
// static volume's first use in node mode).
func (s *nodeServer) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	const op = "node publish volume"
	id, node := req.GetVolumeId(), s.p.cfg.NodeID
	target, err := volumePath(op, id, "target_path", req.GetTargetPath())
	if err != nil {
		return nil, err
	}
	mode, err := parseCapability(req.GetVolumeCapability())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%s %q: %v", op, id, err)
	}
	if n, ok := req.GetPublishContext()[publishContextNodeID]; ok && n != node {
		return nil, status.Errorf(codes.FailedPrecondition, "%s %q: the publish context is for node %q, but this is node %q", op, id, n, node)
	}
	staging := ""
	switch {
	case req.GetStagingTargetPath() != "":
		if staging, err = absPath(op, id, "staging_target_path", req.GetStagingTargetPath()); err != nil {
			return nil, err
		}
	case s.p.cfg.Stage:
		return nil, status.Errorf(codes.FailedPrecondition, "%s %q: staging_target_path is required: stage the volume with NodeStageVolume first", op, id)
	}
	err = s.p.store.update(ctx, false, func(tx *txn) error {
		v := tx.Volumes[id]
		switch {
		case v != nil:
		case s.p.cfg.Mode != ModeNode:
			return status.Errorf(codes.NotFound, "%s %q: volume does not exist", op, id)
		case s.p.cfg.Stage:
			return status.Errorf(codes.FailedPrecondition, "%s %q: volume is not staged on node %q; call NodeStageVolume first", op, id, node)
		default:
			if v, err = s.p.staticVolume(op, id); err != nil {
				return err
			}
		}
		// From the staging only if the volume is staged there: a plugin
		// that stopped staging still publishes what was staged before.
		if st, ok := v.stageOn(node); !ok || st.Path != staging {
			staging = ""
		}
		a, attached := v.attachment(node)
		readonly := req.GetReadonly() || mode.readerOnly() || (attached && a.Readonly)
		if pub, ok := v.publish(node, target); ok {
			if pub.Mode != mode || pub.Readonly != readonly || pub.StagingPath != staging {
				return status.Errorf(codes.AlreadyExists, "%s %q: already published at %q with %s (readonly=%t, staged at %q), not %s (readonly=%t, staged at %q)",
					op, id, target, pub.Mode, pub.Readonly, pub.StagingPath, mode, readonly, staging)
			}
			if pub.Block {
				return nil
			}
			return s.ensureMounted(v, s.publishSource(v, pub.StagingPath), target, readonly)
		}
		if other, ok := tx.publishedAt(node, target); ok {
			return status.Errorf(codes.AlreadyExists, "%s %q: volume %q is already published at %q", op, id, other.ID, target)
		}
		if staging == "" {
			if s.p.cfg.Stage {
				return status.Errorf(codes.FailedPrecondition, "%s %q: volume is not staged on node %q at %q; call NodeStageVolume first", op, id, node, req.GetStagingTargetPath())
			}
			// What NodeStageVolume checks for a plugin that stages.
			if !attached && !v.Static {
				return status.Errorf(codes.FailedPrecondition, "%s %q: volume is not controller-published to node %q (published to %q); call ControllerPublishVolume first",
					op, id, node, v.publishedNodes())
			}
		}
		if err := checkConflict(id, v.usages(), usage{Kind: usagePublish, NodeID: node, Path: target, Mode: mode, Readonly: readonly}); err != nil {
			return status.Errorf(codes.FailedPrecondition, "%s %q: %v", op, id, err)
		}
		if isBlock(req.GetVolumeCapability()) {
			created, err := s.publishBlock(op, v, target, readonly)
			if err != nil {
				return err
			}
			return s.recordPublish(tx, v, Publish{NodeID: node, TargetPath: target, StagingPath: staging, Mode: mode, Readonly: readonly, CreatedTarget: created, Block: true})
		}
		created, err := makeTarget(target)
		if err != nil {
			return err
		}
		if !created {
			mounted, err := isMountpoint(target)
			if err != nil {
				return err
			}
			if mounted {
				if err := s.adoptMount(op, v, target); err != nil {
					return err
				}
				return s.recordPublish(tx, v, Publish{NodeID: node, TargetPath: target, StagingPath: staging, Mode: mode, Readonly: readonly})
			}
		}
		if err := bindMount(s.publishSource(v, staging), target, readonly); err != nil {
			if created {
				os.Remove(target)
			}
			return err
		}
		return s.recordPublish(tx, v, Publish{NodeID: node, TargetPath: target, StagingPath: staging, Mode: mode, Readonly: readonly, CreatedTarget: created})
	})
	if err != nil {
		return nil, statusErr(op, id, err)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// publishSource is what a publish binds: the staging path it was staged
// at, or the volume directory for a publish without staging.
func (s *nodeServer) publishSource(v *Volume, staging string) string {
	if staging != "" {
		return staging
	}
	return s.p.volumeDir(v.ID)
}

func (s *nodeServer) recordPublish(tx *txn, v *Volume, pub Publish) error {
	c := v.Copy()
	c.Publishes = append(c.Publishes, pub)
	tx.putVolume(c)
	s.p.log.Debug("published volume", "volume_id", v.ID, "node_id", pub.NodeID, "target_path", pub.TargetPath, "readonly", pub.Readonly)
	return nil
}

// makeTarget creates the target directory, and reports whether it did (and
// so must remove it at unpublish). Its parent should exist (the CO's job);
// if not, it is created too.
func makeTarget(target string) (bool, error) {
	err := os.Mkdir(target, 0o750)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrExist):
		fi, err := os.Stat(target)
		if err != nil {
			return false, fmt.Errorf("checking target path: %w", err)
		}
		if !fi.IsDir() {
			return false, status.Errorf(codes.InvalidArgument, "target path %q exists and is not a directory", target)
		}
		return false, nil
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(target, 0o750); err != nil {
			return false, fmt.Errorf("creating target path: %w", err)
		}
		return true, nil
	}
	return false, fmt.Errorf("creating target path: %w", err)
}

// NodeUnpublishVolume unmounts the target path and removes it if the plugin
// created it. A target that is not mounted, or missing, is success.
func (s *nodeServer) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	const op = "node unpublish volume"
	id, node := req.GetVolumeId(), s.p.cfg.NodeID
	target, err := volumePath(op, id, "target_path", req.GetTargetPath())
	if err != nil {
		return nil, err
	}
	err = s.p.store.update(ctx, false, func(tx *txn) error {
		v := tx.Volumes[id]
		if v == nil {
			return status.Errorf(codes.NotFound, "%s %q: volume does not exist", op, id)
		}
		pub, recorded := v.publish(node, target)
		if !recorded {
			// Not published here, as far as the state knows; clean up only
			// a mount of this volume left by a crash, never anything else.
			if !s.strayMount(id, target) {
				return nil
			}
			pub.CreatedTarget = true
		}
		// A block publish: the loop device mounted there goes with it.
		loop, _, isLoop := loopAt(target)
		if _, err := unmountAll(target); err != nil {
			return err
		}
		if isLoop && (recorded && pub.Block) {
			if err := detachLoop(loop); err != nil {
				return err
			}
		}
		if pub.CreatedTarget {
			s.removeTarget(id, target)
		}
		if recorded {
			c := v.Copy()
			c.Publishes = slices.DeleteFunc(c.Publishes, func(p Publish) bool { return p.NodeID == node && p.TargetPath == target })
			tx.putVolume(c)
		}
		s.p.log.Debug("unpublished volume", "volume_id", id, "node_id", node, "target_path", target)
		return nil
	})
	if err != nil {
		return nil, statusErr(op, id, err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// removeTarget removes the (now unmounted) target directory. A directory
// that is not empty holds data that is not in the volume: it is left alone.
func (s *nodeServer) removeTarget(id, target string) {
	err := os.Remove(target)
	switch {
	case err == nil, errors.Is(err, os.ErrNotExist):
	case errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
		s.p.log.Warn("target path is not empty after unmount; leaving it", "volume_id", id, "target_path", target)
	default:
		s.p.log.Warn("removing target path", "volume_id", id, "target_path", target, "error", err)
	}
}
