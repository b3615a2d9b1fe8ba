package hostpath

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// controllerServer serves the CSI Controller service. Its RPCs change the
// state durably (see store).
type controllerServer struct {
	csi.UnimplementedControllerServer
	p *Plugin
}

// controllerCaps are the controller capabilities; each is implemented.
var controllerCaps = []csi.ControllerServiceCapability_RPC_Type{
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
	csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
	csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
	csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
	csi.ControllerServiceCapability_RPC_GET_VOLUME,
	csi.ControllerServiceCapability_RPC_GET_CAPACITY,
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
	csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
	csi.ControllerServiceCapability_RPC_GET_SNAPSHOT,
	csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
	csi.ControllerServiceCapability_RPC_PUBLISH_READONLY,
	csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	csi.ControllerServiceCapability_RPC_MODIFY_VOLUME,
}

func (s *controllerServer) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	caps := make([]*csi.ControllerServiceCapability, 0, len(controllerCaps))
	for _, t := range controllerCaps {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: t},
		}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// GetCapacity reports what is left of CapacityBytes, or, without a
// configured capacity, the free space of the file system under the root.
func (s *controllerServer) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	for _, c := range req.GetVolumeCapabilities() {
		if _, err := parseCapability(c); err != nil {
			// No volume with that capability can be provisioned here.
			return &csi.GetCapacityResponse{AvailableCapacity: 0}, nil
		}
	}
	var avail int64
	if s.p.cfg.CapacityBytes > 0 {
		err := s.p.store.read(ctx, func(st *State) error {
			avail = max(0, s.p.cfg.CapacityBytes-st.usedCapacity(""))
			return nil
		})
		if err != nil {
			return nil, statusErr("get capacity", "", err)
		}
	} else {
		var fs unix.Statfs_t
		if err := unix.Statfs(s.p.cfg.Root, &fs); err != nil {
			return nil, status.Errorf(codes.Internal, "get capacity: statfs %s: %v", s.p.cfg.Root, err)
		}
		avail = int64(fs.Bavail) * fs.Bsize
	}
	return &csi.GetCapacityResponse{
		AvailableCapacity: avail,
		MaximumVolumeSize: wrapperspb.Int64(avail),
	}, nil
}
