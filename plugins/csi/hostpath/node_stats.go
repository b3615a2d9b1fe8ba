package hostpath

import (
	"context"
	"errors"
	"io/fs"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// checkNodePath checks that a volume exists and is staged or published at
// path on this node: NotFound otherwise, as the spec asks of
// NodeGetVolumeStats and NodeExpandVolume.
func (s *nodeServer) checkNodePath(ctx context.Context, op, id, path string) (*Volume, error) {
	var vol *Volume
	err := s.p.store.read(ctx, func(st *State) error {
		v := st.Volumes[id]
		if v == nil {
			return status.Errorf(codes.NotFound, "%s %q: volume does not exist", op, id)
		}
		if !v.hasPath(s.p.cfg.NodeID, path) {
			return status.Errorf(codes.NotFound, "%s %q: volume is not staged or published on node %q at %q", op, id, s.p.cfg.NodeID, path)
		}
		vol = v
		return nil
	})
	return vol, err
}

// NodeGetVolumeStats reports the statfs(2) numbers of the file system
// holding the volume: a directory has no size of its own.
func (s *nodeServer) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	const op = "node get volume stats"
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Errorf(codes.InvalidArgument, "%s: volume_id is required", op)
	}
	if req.GetVolumePath() == "" {
		return nil, status.Errorf(codes.InvalidArgument, "%s %q: volume_path is required", op, id)
	}
	path, err := absPath(op, id, "volume_path", req.GetVolumePath())
	if err != nil {
		// A relative path cannot be where the volume is.
		return nil, status.Errorf(codes.NotFound, "%s %q: volume is not at %q", op, id, req.GetVolumePath())
	}
	if _, err := s.checkNodePath(ctx, op, id, path); err != nil {
		return nil, statusErr(op, id, err)
	}
	var fsst unix.Statfs_t
	if err := unix.Statfs(path, &fsst); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, status.Errorf(codes.NotFound, "%s %q: %q does not exist", op, id, path)
		}
		return nil, status.Errorf(codes.Internal, "%s %q: statfs %q: %v", op, id, path, err)
	}
	bs := fsst.Bsize
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{
			Unit:      csi.VolumeUsage_BYTES,
			Total:     int64(fsst.Blocks) * bs,
			Available: int64(fsst.Bavail) * bs,
			Used:      int64(fsst.Blocks-fsst.Bfree) * bs,
		},
		{
			Unit:      csi.VolumeUsage_INODES,
			Total:     int64(fsst.Files),
			Available: int64(fsst.Ffree),
			Used:      int64(fsst.Files - fsst.Ffree),
		},
	}}, nil
}

// NodeExpandVolume has nothing to do for a directory; it checks its
// arguments and reports the volume's capacity.
func (s *nodeServer) NodeExpandVolume(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	const op = "node expand volume"
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Errorf(codes.InvalidArgument, "%s: volume_id is required", op)
	}
	if req.GetVolumePath() == "" {
		return nil, status.Errorf(codes.InvalidArgument, "%s %q: volume_path is required", op, id)
	}
	if c := req.GetVolumeCapability(); c != nil {
		if _, err := parseCapability(c); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%s %q: %v", op, id, err)
		}
	}
	required, limit := req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes()
	if err := checkRange(required, limit); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%s %q: %v", op, id, err)
	}
	path, err := absPath(op, id, "volume_path", req.GetVolumePath())
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "%s %q: volume is not at %q", op, id, req.GetVolumePath())
	}
	v, err := s.checkNodePath(ctx, op, id, path)
	if err != nil {
		return nil, statusErr(op, id, err)
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: max(v.CapacityBytes, required)}, nil
}
