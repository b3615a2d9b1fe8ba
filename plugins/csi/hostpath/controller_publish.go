package hostpath

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// publishContextNodeID is the publish_context key naming the node a volume
// was controller-published to; NodeStageVolume on any other node refuses it.
const publishContextNodeID = "node_id"

// ControllerPublishVolume records that the volume is attached to a node. It
// enforces the access mode across nodes (see checkConflict) and the node's
// maximum number of volumes. With Config.StaticVolumes, an unknown volume
// is created empty (a static volume) instead of being NotFound.
func (s *controllerServer) ControllerPublishVolume(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	id, nodeID := req.GetVolumeId(), req.GetNodeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "controller publish volume: volume_id is required")
	}
	if nodeID == "" {
		return nil, status.Errorf(codes.InvalidArgument, "controller publish volume %q: node_id is required", id)
	}
	mode, err := parseCapability(req.GetVolumeCapability())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "controller publish volume %q: %v", id, err)
	}
	readonly := req.GetReadonly()
	err = s.p.store.update(ctx, true, func(tx *txn) error {
		v := tx.Volumes[id]
		if v == nil && !s.p.cfg.StaticVolumes {
			return status.Errorf(codes.NotFound, "controller publish volume %q: volume does not exist", id)
		}
		node := tx.Nodes[nodeID]
		if node == nil {
			return status.Errorf(codes.NotFound, "controller publish volume %q: node %q is unknown: no node plugin with that ID has served from %s", id, nodeID, s.p.cfg.Root)
		}
		if v == nil {
			// Config.StaticVolumes: an operator registered the volume with
			// the CO without creating it here.
			sv, err := s.p.staticVolume("controller publish volume", id)
			if err != nil {
				return err
			}
			v = sv
		}
		if a, ok := v.attachment(nodeID); ok {
			if a.Mode != mode || a.Readonly != readonly {
				return status.Errorf(codes.AlreadyExists, "controller publish volume %q: already published to node %q with %s (readonly=%t), not %s (readonly=%t)",
					id, nodeID, a.Mode, a.Readonly, mode, readonly)
			}
			return nil
		}
		req := usage{Kind: usageAttach, NodeID: nodeID, Mode: mode, Readonly: readonly}
		if err := checkConflict(id, v.usages(), req); err != nil {
			return status.Errorf(codes.FailedPrecondition, "controller publish volume %q: %v", id, err)
		}
		if n := tx.attachedCount(nodeID); node.MaxVolumes > 0 && n >= node.MaxVolumes {
			return status.Errorf(codes.ResourceExhausted, "controller publish volume %q: node %q already has %d volumes published, its maximum", id, nodeID, n)
		}
		c := v.Copy()
		c.Attachments = append(c.Attachments, Attachment{NodeID: nodeID, Mode: mode, Readonly: readonly})
		tx.putVolume(c)
		s.p.log.Debug("controller published volume", "volume_id", id, "node_id", nodeID, "mode", mode, "readonly", readonly)
		return nil
	})
	if err != nil {
		return nil, statusErr("controller publish volume", id, err)
	}
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{publishContextNodeID: nodeID}}, nil
}

// ControllerUnpublishVolume removes the attachment to a node (to every node
// when node_id is empty). Unpublishing what is not published succeeds.
//
// The CO must unstage and unpublish on the node first. If it does not (it
// is fencing a node that is down), the node's stage and publish records are
// dropped too, as a real detach would make its mounts useless: otherwise a
// dead node would block the volume forever. This is logged as a warning.
func (s *controllerServer) ControllerUnpublishVolume(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	id, nodeID := req.GetVolumeId(), req.GetNodeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "controller unpublish volume: volume_id is required")
	}
	err := s.p.store.update(ctx, true, func(tx *txn) error {
		v := tx.Volumes[id]
		if v == nil {
			return nil
		}
		nodes := []string{nodeID}
		if nodeID == "" {
			nodes = v.publishedNodes()
		}
		c := v.Copy()
		changed := false
		for _, n := range nodes {
			_, attached := c.attachment(n)
			stages, publishes := c.dropNode(n)
			if stages+publishes > 0 {
				s.p.log.Warn("controller unpublish fenced a node that still had the volume staged or published; dropping those records",
					"volume_id", id, "node_id", n, "stages", stages, "publishes", publishes)
			}
			changed = changed || attached || stages+publishes > 0
		}
		if changed {
			tx.putVolume(c)
			s.p.log.Debug("controller unpublished volume", "volume_id", id, "node_id", nodeID)
		}
		return nil
	})
	if err != nil {
		return nil, statusErr("controller unpublish volume", id, err)
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}
