package hostpath

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"

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
	v, err := s.checkNodePath(ctx, op, id, path)
	if err != nil {
		return nil, statusErr(op, id, err)
	}
	var fsst unix.Statfs_t
	if err := unix.Statfs(path, &fsst); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, status.Errorf(codes.NotFound, "%s %q: %q does not exist", op, id, path)
		}
		return nil, status.Errorf(codes.Internal, "%s %q: statfs %q: %v", op, id, path, err)
	}
	// A volume is a directory: what it uses is what its files hold (the
	// operator wants the bytes the job wrote, not the host disk's). Its
	// total is its capacity when it has one, else the file system's; what
	// is available is bounded by both.
	used, files, err := dirUsage(path)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%s %q: measuring %q: %v", op, id, path, err)
	}
	bs := fsst.Bsize
	total, avail := int64(fsst.Blocks)*bs, int64(fsst.Bavail)*bs
	if v.CapacityBytes > 0 {
		total = v.CapacityBytes
		avail = max(0, min(avail, total-used))
	}
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: total, Available: avail, Used: used},
		{Unit: csi.VolumeUsage_INODES, Total: files + int64(fsst.Ffree), Available: int64(fsst.Ffree), Used: files},
	}}, nil
}

// dirUsage is the bytes the regular files under root hold (by size) and
// the number of entries under it, root excluded. Entries that vanish
// while it walks are skipped.
func dirUsage(root string) (bytes, entries int64, err error) {
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if p == root {
			return nil
		}
		entries++
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				bytes += info.Size()
			}
		}
		return nil
	})
	return bytes, entries, err
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
