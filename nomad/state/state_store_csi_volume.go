package state

import (
	"fmt"
	"strings"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/structs"
)

// CSIVolumeByID returns the volume, or nil. Do not mutate it.
func (s *StateStore) CSIVolumeByID(ws memdb.WatchSet, ns, id string) (*structs.CSIVolume, error) {
	raw, err := s.first(ws, TableCSIVolumes, IndexID, ns, id)
	if raw == nil || err != nil {
		return nil, err
	}
	return raw.(*structs.CSIVolume), nil
}

// CSIVolumes iterates over the volumes (*structs.CSIVolume) of ns, or of
// every namespace when ns is structs.AllNamespaces, by namespace and ID.
func (s *StateStore) CSIVolumes(ws memdb.WatchSet, ns string) (memdb.ResultIterator, error) {
	if ns == structs.AllNamespaces {
		return s.list(ws, TableCSIVolumes, IndexID)
	}
	return s.list(ws, TableCSIVolumes, IndexID+prefixSuffix, ns, "")
}

// CSIVolumesModifiedSince iterates over the volumes of every namespace
// written after index, in the order of their ModifyIndex: a reader that
// remembers the index it last read (the leader's capacity watcher) reads
// what changed, not the whole table.
func (s *StateStore) CSIVolumesModifiedSince(ws memdb.WatchSet, index uint64) (memdb.ResultIterator, error) {
	iter, err := s.db.Txn(false).LowerBound(TableCSIVolumes, IndexModify, index+1)
	if err != nil {
		return nil, fmt.Errorf("listing %s by %s: %w", TableCSIVolumes, IndexModify, err)
	}
	ws.Add(iter.WatchCh())
	return iter, nil
}

// CSIVolumesByIDPrefix iterates over the volumes of ns (or all namespaces)
// whose ID starts with prefix.
func (s *StateStore) CSIVolumesByIDPrefix(ws memdb.WatchSet, ns, prefix string) (memdb.ResultIterator, error) {
	if ns != structs.AllNamespaces {
		return s.list(ws, TableCSIVolumes, IndexID+prefixSuffix, ns, prefix)
	}
	iter, err := s.list(ws, TableCSIVolumes, IndexID)
	if err != nil {
		return nil, err
	}
	return memdb.NewFilterIterator(iter, func(raw any) bool {
		return !strings.HasPrefix(raw.(*structs.CSIVolume).ID, prefix)
	}), nil
}

// CSIVolumesByPluginID iterates over the volumes of ns (or all namespaces)
// served by a plugin.
func (s *StateStore) CSIVolumesByPluginID(ws memdb.WatchSet, ns, pluginID string) (memdb.ResultIterator, error) {
	iter, err := s.list(ws, TableCSIVolumes, IndexPluginID, pluginID)
	if err != nil {
		return nil, err
	}
	return inNamespace(iter, ns, func(v *structs.CSIVolume) string { return v.Namespace }), nil
}

// CSIVolumesByNodeID iterates over the volumes, in any namespace, with a
// live claim (any step before freed) by an alloc on nodeID.
func (s *StateStore) CSIVolumesByNodeID(ws memdb.WatchSet, nodeID string) (memdb.ResultIterator, error) {
	return s.list(ws, TableCSIVolumes, IndexNode, nodeID)
}

// UpsertCSIVolumes registers volumes or updates their specs. Claims are
// owned by the claim writes, so register never drops or adds one: an
// existing volume keeps its Claims, PastClaims, the access and attachment
// mode of those claims, CreateIndex and CreateTime; a new volume starts
// with none. An empty Namespace means the default one.
func (s *StateStore) UpsertCSIVolumes(index uint64, vols []*structs.CSIVolume) error {
	return s.upsertCSIVolumes(index, vols, false)
}

// UpsertCSIVolumesOwned is UpsertCSIVolumes for a caller that hands the
// volumes over and never touches them again (the FSM, which decoded them
// from the Raft entry): they are stored as they are instead of copied,
// which was a fifth of the time of storing a 1,000-volume register.
func (s *StateStore) UpsertCSIVolumesOwned(index uint64, vols []*structs.CSIVolume) error {
	return s.upsertCSIVolumes(index, vols, true)
}

func (s *StateStore) upsertCSIVolumes(index uint64, vols []*structs.CSIVolume, owned bool) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	for _, vol := range vols {
		if err := upsertCSIVolumeTxn(txn, vol, owned); err != nil {
			return err
		}
	}
	return txn.commit()
}

// upsertCSIVolumeTxn stores vol, or a copy of it unless owned.
func upsertCSIVolumeTxn(txn *writeTxn, vol *structs.CSIVolume, owned bool) error {
	if vol == nil || vol.ID == "" {
		return structs.NewError(structs.CodeInvalid, "registering volume: missing volume ID")
	}
	v := vol
	if !owned {
		v = vol.Copy()
	}
	if v.Namespace == "" {
		v.Namespace = structs.DefaultNamespace
	}
	existing, err := volumeTxn(txn, v.Namespace, v.ID)
	if err != nil {
		return err
	}
	if existing != nil {
		// Stored objects are immutable, so sharing the claims is safe.
		v.Claims, v.PastClaims = existing.Claims, existing.PastClaims
		v.AccessMode, v.AttachmentMode = existing.AccessMode, existing.AttachmentMode
		v.CreateIndex, v.CreateTime = existing.CreateIndex, existing.CreateTime
		v.Created = v.Created || existing.Created // a re-register does not forget who made it
	} else {
		v.Claims, v.PastClaims = nil, nil
		v.AccessMode, v.AttachmentMode = "", ""
		v.CreateIndex = txn.index
	}
	v.ModifyIndex = txn.index
	if err := txn.Insert(TableCSIVolumes, v); err != nil {
		return fmt.Errorf("registering volume %q: %w", v.ID, err)
	}
	return nil
}

// DeleteCSIVolumes deregisters volumes, all or none:
//
//   - an unknown volume fails with CodeNotFound;
//   - a volume with live claims fails with CodeConflict naming the volume
//     and every claiming alloc;
//   - with force, a claimed volume is deleted when every claiming alloc is
//     client-terminal (complete, failed, lost) or gone, and refused with
//     CodeConflict naming the allocs that may still use it otherwise.
//
// Force does not unpublish anything: the storage provider may still have
// the volume attached, which is the operator's call to make.
func (s *StateStore) DeleteCSIVolumes(index uint64, ns string, ids []string, force bool) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	if ns == "" {
		ns = structs.DefaultNamespace
	}
	for _, id := range ids {
		vol, err := volumeTxn(txn, ns, id)
		if err != nil {
			return err
		}
		if vol == nil {
			return structs.NewError(structs.CodeNotFound, "volume %q not found in namespace %q", id, ns)
		}
		if err := deregisterAllowedTxn(txn, vol, force); err != nil {
			return err
		}
		if err := txn.Delete(TableCSIVolumes, vol); err != nil {
			return fmt.Errorf("deregistering volume %q: %w", id, err)
		}
	}
	return txn.commit()
}

func deregisterAllowedTxn(txn *writeTxn, vol *structs.CSIVolume, force bool) error {
	if len(vol.Claims) == 0 {
		return nil
	}
	var blocking []string
	for _, c := range vol.LiveClaims() {
		desc := fmt.Sprintf("alloc %s on node %s (%s)", c.AllocID, c.NodeID, c.Step.Describe())
		if !force {
			blocking = append(blocking, desc)
			continue
		}
		alloc, err := allocTxn(txn, c.AllocID)
		if err != nil {
			return err
		}
		if alloc != nil && !alloc.ClientTerminalStatus() {
			blocking = append(blocking, fmt.Sprintf("%s, alloc is %s", desc, alloc.ClientStatus))
		}
	}
	switch {
	case len(blocking) == 0:
		return nil
	case force:
		return structs.NewError(structs.CodeConflict,
			"volume %q in namespace %q is in use by %s; stop those allocs before forcing deregistration",
			vol.ID, vol.Namespace, strings.Join(blocking, "; "))
	default:
		return structs.NewError(structs.CodeConflict,
			"volume %q in namespace %q has live claims: %s; wait for them to be freed, or stop the allocs and deregister with -force",
			vol.ID, vol.Namespace, strings.Join(blocking, "; "))
	}
}

func volumeTxn(txn *writeTxn, ns, id string) (*structs.CSIVolume, error) {
	raw, err := txn.First(TableCSIVolumes, IndexID, ns, id)
	if err != nil {
		return nil, fmt.Errorf("reading volume %q: %w", id, err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.CSIVolume), nil
}
