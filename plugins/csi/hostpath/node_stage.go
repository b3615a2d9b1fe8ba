package hostpath

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NodeStageVolume bind-mounts the volume directory on the staging path
// (read-only for reader-only access modes). It refuses, with
// FailedPrecondition, a volume that another node uses in a way its access
// mode forbids, and a controller-created volume that is not
// controller-published to this node.
func (s *nodeServer) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	const op = "node stage volume"
	id, node := req.GetVolumeId(), s.p.cfg.NodeID
	path, err := volumePath(op, id, "staging_target_path", req.GetStagingTargetPath())
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
	err = s.p.store.update(ctx, false, func(tx *txn) error {
		v, err := s.nodeVolume(tx, op, id)
		if err != nil {
			return err
		}
		if st, ok := v.stageOn(node); ok {
			if st.Path != path {
				return status.Errorf(codes.FailedPrecondition, "%s %q: already staged on node %q at %q; a volume has one staging path per node", op, id, node, st.Path)
			}
			if st.Mode != mode {
				return status.Errorf(codes.AlreadyExists, "%s %q: already staged at %q with access mode %s, not %s", op, id, path, st.Mode, mode)
			}
			// Repeated call: make sure the mount is still there.
			return s.ensureMounted(v, s.p.volumeDir(id), path, mode.readerOnly())
		}
		if err := checkConflict(id, v.usages(), usage{Kind: usageStage, NodeID: node, Path: path, Mode: mode}); err != nil {
			return status.Errorf(codes.FailedPrecondition, "%s %q: %v", op, id, err)
		}
		// This plugin's controller advertises PUBLISH_UNPUBLISH_VOLUME, so a
		// volume it created must be controller-published here first.
		if _, ok := v.attachment(node); !ok && !v.Static {
			return status.Errorf(codes.FailedPrecondition, "%s %q: volume is not controller-published to node %q (published to %q); call ControllerPublishVolume first",
				op, id, node, v.publishedNodes())
		}
		if err := os.MkdirAll(path, 0o750); err != nil {
			return fmt.Errorf("creating staging path: %w", err)
		}
		mounted, err := isMountpoint(path)
		if err != nil {
			return err
		}
		if mounted {
			if err := s.adoptMount(op, v, path); err != nil {
				return err
			}
		} else if err := bindMount(s.p.volumeDir(id), path, mode.readerOnly()); err != nil {
			return err
		}
		c := v.Copy()
		c.Stages = append(c.Stages, Stage{NodeID: node, Path: path, Mode: mode})
		tx.putVolume(c)
		s.p.log.Debug("staged volume", "volume_id", id, "node_id", node, "path", path, "mode", mode)
		return nil
	})
	if err != nil {
		return nil, statusErr(op, id, err)
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

// ensureMounted re-creates a recorded mount that has gone (for example, the
// plugin restarted in a fresh mount namespace).
func (s *nodeServer) ensureMounted(v *Volume, src, path string, readonly bool) error {
	mounted, err := isMountpoint(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(path, 0o750); err != nil {
			return fmt.Errorf("re-creating %q: %w", path, err)
		}
		mounted, err = false, nil
	}
	if err != nil || mounted {
		return err
	}
	s.p.log.Warn("recorded mount is missing; mounting again", "volume_id", v.ID, "path", path)
	return bindMount(src, path, readonly)
}

// strayMount reports whether path holds a mount of volume id, for a stage
// or publish the state does not record: a crash between mounting and
// recording leaves one. Unstage and unpublish clean up such a mount and
// nothing else; a path that cannot be inspected is not one.
func (s *nodeServer) strayMount(id, path string) bool {
	mounted, err := isMountpoint(path)
	if err != nil || !mounted {
		return false
	}
	ok, _ := mountShows(path, s.p.volumeDir(id))
	return ok
}

// volumePath checks the volume ID and the path field of a node RPC, and
// returns the path cleaned (see absPath).
func volumePath(op, id, field, path string) (string, error) {
	if id == "" {
		return "", status.Errorf(codes.InvalidArgument, "%s: volume_id is required", op)
	}
	return absPath(op, id, field, path)
}

// NodeUnstageVolume unmounts the staging path. It succeeds when nothing is
// staged there, and refuses, with FailedPrecondition, while the volume is
// still published on this node.
func (s *nodeServer) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	const op = "node unstage volume"
	id, node := req.GetVolumeId(), s.p.cfg.NodeID
	path, err := volumePath(op, id, "staging_target_path", req.GetStagingTargetPath())
	if err != nil {
		return nil, err
	}
	err = s.p.store.update(ctx, false, func(tx *txn) error {
		v := tx.Volumes[id]
		if v == nil {
			return status.Errorf(codes.NotFound, "%s %q: volume does not exist", op, id)
		}
		for _, pub := range v.Publishes {
			if pub.NodeID == node && pub.StagingPath == path {
				return status.Errorf(codes.FailedPrecondition, "%s %q: volume is still published on node %q at %q; unpublish it first", op, id, node, pub.TargetPath)
			}
		}
		st, recorded := v.stageOn(node)
		recorded = recorded && st.Path == path
		if !recorded {
			// Not staged here, as far as the state knows; unmount only a
			// mount of this volume left by a crash, never anything else.
			if !s.strayMount(id, path) {
				return nil
			}
		}
		if _, err := unmountAll(path); err != nil {
			return err
		}
		if recorded {
			c := v.Copy()
			c.Stages = slices.DeleteFunc(c.Stages, func(s Stage) bool { return s.NodeID == node && s.Path == path })
			tx.putVolume(c)
		}
		s.p.log.Debug("unstaged volume", "volume_id", id, "node_id", node, "path", path)
		return nil
	})
	if err != nil {
		return nil, statusErr(op, id, err)
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}
