package hostpath

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// nodeServer serves the CSI Node service for Config.NodeID. Its RPCs record
// stages and publishes in the shared state without fdatasync (see store).
type nodeServer struct {
	csi.UnimplementedNodeServer
	p *Plugin
}

// nodeCaps are the node capabilities; each is implemented.
// STAGE_UNSTAGE_VOLUME is added with Config.Stage.
var nodeCaps = []csi.NodeServiceCapability_RPC_Type{
	csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
	csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
	csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
}

func (s *nodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	types := nodeCaps
	if s.p.cfg.Stage {
		types = append([]csi.NodeServiceCapability_RPC_Type{csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}, nodeCaps...)
	}
	caps := make([]*csi.NodeServiceCapability, 0, len(types))
	for _, t := range types {
		caps = append(caps, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
			Rpc: &csi.NodeServiceCapability_RPC{Type: t},
		}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// NodeGetInfo fails with FailedPrecondition, saying why, when the plugin
// cannot make bind mounts (see Config.CanMount): the CO then shows the node
// plugin unhealthy with that reason and places no volume here.
func (s *nodeServer) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	if err := s.p.mountErr; err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	resp := &csi.NodeGetInfoResponse{
		NodeId:            s.p.cfg.NodeID,
		MaxVolumesPerNode: s.p.cfg.MaxVolumesPerNode,
	}
	if s.p.cfg.Topology {
		resp.AccessibleTopology = &csi.Topology{Segments: map[string]string{TopologyKey: s.p.cfg.NodeID}}
	}
	return resp, nil
}

// nodeVolume finds the volume a node RPC names.
//
// A node-only plugin has no controller to create volumes: its volumes are
// statically provisioned, registered with the CO by an operator under an ID
// of their choosing. So in node mode an unknown volume ID is created here,
// on first use, as an empty directory (and recorded as Static). A plugin
// that serves the controller creates volumes with CreateVolume, or with
// Config.StaticVolumes on the first ControllerPublishVolume, and an unknown
// ID here is NotFound.
func (s *nodeServer) nodeVolume(tx *txn, op, id string) (*Volume, error) {
	if v := tx.Volumes[id]; v != nil {
		return v, nil
	}
	if s.p.cfg.Mode != ModeNode {
		return nil, status.Errorf(codes.NotFound, "%s %q: volume does not exist", op, id)
	}
	return s.p.staticVolume(op, id)
}

// staticVolume creates the directory of a statically provisioned volume
// the plugin is asked to use for the first time, and returns the volume to
// record (the caller puts it, with its first use, in the same txn). Call
// it with the state lock held.
func (p *Plugin) staticVolume(op, id string) (*Volume, error) {
	if err := validID(id); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%s %q: cannot create a static volume: %v", op, id, err)
	}
	dir := p.volumeDir(id)
	if err := os.Mkdir(dir, volumeDirMode); err != nil && !os.IsExist(err) {
		return nil, fmt.Errorf("creating static volume directory: %w", err)
	}
	if err := os.Chmod(dir, volumeDirMode); err != nil {
		return nil, fmt.Errorf("creating static volume directory: %w", err)
	}
	p.log.Info("created static volume on first use", "volume_id", id, "path", dir)
	return &Volume{ID: id, Static: true, CreatedAt: time.Now().UTC()}, nil
}

// absPath checks that a path from a request is absolute and cleans it.
func absPath(op, id, field, path string) (string, error) {
	if path == "" {
		return "", status.Errorf(codes.InvalidArgument, "%s %q: %s is required", op, id, field)
	}
	if !filepath.IsAbs(path) {
		return "", status.Errorf(codes.InvalidArgument, "%s %q: %s %q is not an absolute path", op, id, field, path)
	}
	return filepath.Clean(path), nil
}

// adoptMount decides about a mount found at path that the state does not
// record: the plugin died between mounting and recording it. If it shows
// the volume directory, it is adopted; anything else is in the way.
func (s *nodeServer) adoptMount(op string, v *Volume, path string) error {
	ok, err := mountShows(path, s.p.volumeDir(v.ID))
	if err != nil {
		return fmt.Errorf("inspecting the mount at %q: %w", path, err)
	}
	if !ok {
		return status.Errorf(codes.AlreadyExists, "%s %q: %q already has something else mounted on it", op, v.ID, path)
	}
	s.p.log.Warn("adopting an unrecorded mount of the volume", "volume_id", v.ID, "path", path)
	return nil
}
