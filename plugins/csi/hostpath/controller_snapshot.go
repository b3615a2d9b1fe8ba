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
	"google.golang.org/protobuf/types/known/timestamppb"
)

// CreateSnapshot copies the volume directory into <root>/snapshots/<id>. The
// copy is taken while the volume may be in use, so it is crash-consistent at
// best, file by file; the snapshot is ready to use when the call returns.
func (s *controllerServer) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	name, src := req.GetName(), req.GetSourceVolumeId()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "create snapshot: name is required")
	}
	if src == "" {
		return nil, status.Errorf(codes.InvalidArgument, "create snapshot %q: source_volume_id is required", name)
	}
	var snap *Snapshot
	err := s.p.store.update(ctx, true, func(tx *txn) error {
		if sn := tx.snapshotByName(name); sn != nil {
			if sn.SourceVolumeID != src {
				return status.Errorf(codes.AlreadyExists, "create snapshot %q: snapshot %q already has that name but was taken of volume %q, not %q", name, sn.ID, sn.SourceVolumeID, src)
			}
			snap = sn
			return nil
		}
		v := tx.Volumes[src]
		if v == nil {
			return status.Errorf(codes.NotFound, "create snapshot %q: source volume %q does not exist", name, src)
		}
		id, err := newID("snap-")
		if err != nil {
			return err
		}
		tmp := filepath.Join(s.p.snapshotsDir, tmpPrefix+id)
		n, err := copyTree(ctx, s.p.volumeDir(v.ID), tmp)
		if err == nil {
			err = os.Rename(tmp, s.p.snapshotDir(id))
		}
		if err != nil {
			os.RemoveAll(tmp)
			return fmt.Errorf("copying volume %q: %w", src, err)
		}
		size := v.CapacityBytes
		if size == 0 {
			size = n
		}
		snap = &Snapshot{ID: id, Name: name, SourceVolumeID: src, SizeBytes: size, CreatedAt: time.Now().UTC()}
		tx.putSnapshot(snap)
		s.p.log.Info("created snapshot", "snapshot_id", id, "volume_id", src, "name", name)
		return nil
	})
	if err != nil {
		return nil, statusErr("create snapshot", name, err)
	}
	return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(snap)}, nil
}

func csiSnapshot(sn *Snapshot) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId:     sn.ID,
		SourceVolumeId: sn.SourceVolumeID,
		SizeBytes:      sn.SizeBytes,
		CreationTime:   timestamppb.New(sn.CreatedAt),
		ReadyToUse:     true,
	}
}

// DeleteSnapshot removes a snapshot; deleting an unknown one succeeds.
// Volumes created from it are independent copies and are not affected.
func (s *controllerServer) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	id := req.GetSnapshotId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "delete snapshot: snapshot_id is required")
	}
	err := s.p.store.update(ctx, true, func(tx *txn) error {
		if tx.Snapshots[id] == nil {
			return nil
		}
		if err := os.RemoveAll(s.p.snapshotDir(id)); err != nil {
			return fmt.Errorf("removing snapshot directory: %w", err)
		}
		tx.deleteSnapshot(id)
		s.p.log.Info("deleted snapshot", "snapshot_id", id)
		return nil
	})
	if err != nil {
		return nil, statusErr("delete snapshot", id, err)
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

func (s *controllerServer) ListSnapshots(ctx context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	var resp csi.ListSnapshotsResponse
	err := s.p.store.read(ctx, func(st *State) error {
		var all []*Snapshot
		for _, sn := range st.sortedSnapshots() {
			if (req.GetSnapshotId() == "" || sn.ID == req.GetSnapshotId()) &&
				(req.GetSourceVolumeId() == "" || sn.SourceVolumeID == req.GetSourceVolumeId()) {
				all = append(all, sn)
			}
		}
		ss, next, err := page(all, func(sn *Snapshot) string { return sn.ID }, req.GetStartingToken(), req.GetMaxEntries())
		if err != nil {
			code := codes.Aborted
			if req.GetMaxEntries() < 0 {
				code = codes.InvalidArgument
			}
			return status.Errorf(code, "list snapshots: %v", err)
		}
		for _, sn := range ss {
			resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: csiSnapshot(sn)})
		}
		resp.NextToken = next
		return nil
	})
	if err != nil {
		return nil, statusErr("list snapshots", "", err)
	}
	return &resp, nil
}

func (s *controllerServer) GetSnapshot(ctx context.Context, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	id := req.GetSnapshotId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "get snapshot: snapshot_id is required")
	}
	var resp *csi.GetSnapshotResponse
	err := s.p.store.read(ctx, func(st *State) error {
		sn := st.Snapshots[id]
		if sn == nil {
			return status.Errorf(codes.NotFound, "get snapshot %q: snapshot does not exist", id)
		}
		resp = &csi.GetSnapshotResponse{Snapshot: csiSnapshot(sn)}
		return nil
	})
	if err != nil {
		return nil, statusErr("get snapshot", id, err)
	}
	return resp, nil
}
