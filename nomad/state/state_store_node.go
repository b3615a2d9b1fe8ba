package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/structs"
)

// NodeByID returns the node, or nil. Do not mutate it.
func (s *StateStore) NodeByID(ws memdb.WatchSet, id string) (*structs.Node, error) {
	raw, err := s.first(ws, TableNodes, IndexID, id)
	if raw == nil || err != nil {
		return nil, err
	}
	return raw.(*structs.Node), nil
}

// NodeBySecretID returns the node whose SecretID is secret, or nil. Do not
// mutate it.
func (s *StateStore) NodeBySecretID(ws memdb.WatchSet, secret string) (*structs.Node, error) {
	if secret == "" {
		return nil, nil
	}
	raw, err := s.first(ws, TableNodes, IndexSecretID, secret)
	if raw == nil || err != nil {
		return nil, err
	}
	return raw.(*structs.Node), nil
}

// Nodes iterates over all nodes (*structs.Node) by ID.
func (s *StateStore) Nodes(ws memdb.WatchSet) (memdb.ResultIterator, error) {
	return s.list(ws, TableNodes, IndexID)
}

// DrainingNodes iterates over the nodes with a drain strategy, without
// reading the others: the leader's drainer passes on every node, alloc
// and eval write.
func (s *StateStore) DrainingNodes(ws memdb.WatchSet) (memdb.ResultIterator, error) {
	return s.list(ws, TableNodes, IndexDraining, true)
}

// NodesModifiedSince iterates over the nodes written after index, in the
// order of their ModifyIndex: a reader that remembers the nodes table's
// index it last read (the leader's node watcher) reads what changed, not
// every node. Every node write sets ModifyIndex to its Raft index. A
// deleted node leaves no row: NodesDeletedIndex says when one went.
func (s *StateStore) NodesModifiedSince(ws memdb.WatchSet, index uint64) (memdb.ResultIterator, error) {
	iter, err := s.db.Txn(false).LowerBound(TableNodes, IndexModify, index+1)
	if err != nil {
		return nil, fmt.Errorf("listing %s by %s: %w", TableNodes, IndexModify, err)
	}
	ws.Add(iter.WatchCh())
	return iter, nil
}

// NodesDeletedIndex returns the Raft index of the last write that deleted
// a node, or 0.
func (s *StateStore) NodesDeletedIndex() (uint64, error) {
	return s.Index(indexKeyNodesDeleted)
}

// indexKeyNodesDeleted is the index table's row of the last node
// deletion: the table's own row counts every node write.
const indexKeyNodesDeleted = "nodes_deleted"

// NodesByIDPrefix iterates over the nodes whose ID starts with prefix.
func (s *StateStore) NodesByIDPrefix(ws memdb.WatchSet, prefix string) (memdb.ResultIterator, error) {
	return s.list(ws, TableNodes, IndexID+prefixSuffix, prefix)
}

// UpsertNode registers a node or updates its fingerprint, and derives the
// csi_plugins table from the node's CSI plugin instances.
//
// On update it keeps the servers' own fields: CreateIndex, DrainStrategy
// and SchedulingEligibility (a client re-registering must not undo an
// operator's drain). A new node gets Status initializing and eligibility
// eligible unless the request sets them.
func (s *StateStore) UpsertNode(index uint64, node *structs.Node) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	if err := upsertNodeTxn(txn, node); err != nil {
		return err
	}
	return txn.commit()
}

func upsertNodeTxn(txn *writeTxn, node *structs.Node) error {
	if node == nil || node.ID == "" {
		return structs.NewError(structs.CodeInvalid, "registering node: missing node ID")
	}
	prev, err := nodeTxn(txn, node.ID)
	if err != nil {
		return err
	}
	n := node.Copy()
	if prev != nil {
		n.CreateIndex = prev.CreateIndex
		// A node's secret is its identity: a registration never
		// changes it (the endpoint refuses a different one first).
		n.SecretID = prev.SecretID
		n.DrainStrategy = prev.DrainStrategy // immutable once stored: safe to share
		n.SchedulingEligibility = prev.SchedulingEligibility
	} else {
		n.CreateIndex = txn.index
		if n.Status == "" {
			n.Status = structs.NodeStatusInit
		}
		if n.SchedulingEligibility == "" {
			n.SchedulingEligibility = structs.NodeSchedulingEligible
		}
		if n.DrainStrategy != nil {
			n.SchedulingEligibility = structs.NodeSchedulingIneligible
		}
	}
	n.ModifyIndex = txn.index
	if err := txn.Insert(TableNodes, n); err != nil {
		return fmt.Errorf("registering node %q: %w", n.ID, err)
	}
	return updateNodePluginsTxn(txn, prev, n)
}

// DeleteNode removes nodes and their CSI plugin instances. An unknown ID
// fails the whole write with CodeNotFound.
func (s *StateStore) DeleteNode(index uint64, ids []string) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	for _, id := range ids {
		prev, err := nodeTxn(txn, id)
		if err != nil {
			return err
		}
		if prev == nil {
			return structs.NotFound("node", id)
		}
		if err := txn.Delete(TableNodes, prev); err != nil {
			return fmt.Errorf("deleting node %q: %w", id, err)
		}
		txn.tables[indexKeyNodesDeleted] = struct{}{}
		if err := updateNodePluginsTxn(txn, prev, nil); err != nil {
			return err
		}
	}
	return txn.commit()
}

// UpdateNodeStatus sets a node's status (heartbeat, TTL expiry) at the
// leader's time ts, with the evals the change creates. A node that goes
// down has its CSI plugin instances counted unhealthy ("node down"); when
// it is ready again they are restored from its own fingerprint.
func (s *StateStore) UpdateNodeStatus(index uint64, nodeID, status, desc string, ts int64, evals ...*structs.Evaluation) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	if err := updateNodeStatusTxn(txn, nodeID, status, desc, ts); err != nil {
		return err
	}
	if err := upsertEvalsTxn(txn, evals); err != nil {
		return err
	}
	return txn.commit()
}

// BatchUpdateNodeStatus applies several status updates, and the evals
// they carry plus evals, in one write.
func (s *StateStore) BatchUpdateNodeStatus(index uint64, updates []*structs.NodeUpdateStatusRequest, evals ...*structs.Evaluation) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	for _, u := range updates {
		if err := updateNodeStatusTxn(txn, u.NodeID, u.Status, u.Description, u.Timestamp); err != nil {
			return err
		}
		if err := upsertEvalsTxn(txn, u.Evals); err != nil {
			return err
		}
	}
	if err := upsertEvalsTxn(txn, evals); err != nil {
		return err
	}
	return txn.commit()
}

func updateNodeStatusTxn(txn *writeTxn, nodeID, status, desc string, ts int64) error {
	switch status {
	case structs.NodeStatusInit, structs.NodeStatusReady, structs.NodeStatusDown:
	default:
		return structs.NewError(structs.CodeInvalid, "node %q: invalid status %q (want %s, %s or %s)",
			nodeID, status, structs.NodeStatusInit, structs.NodeStatusReady, structs.NodeStatusDown)
	}
	prev, err := nodeTxn(txn, nodeID)
	if err != nil {
		return err
	}
	if prev == nil {
		return structs.NotFound("node", nodeID)
	}
	n := prev.Copy()
	n.Status = status
	n.StatusDescription = desc
	n.StatusUpdatedAt = ts
	n.ModifyIndex = txn.index
	if err := txn.Insert(TableNodes, n); err != nil {
		return fmt.Errorf("updating status of node %q: %w", nodeID, err)
	}
	return updateNodePluginsTxn(txn, prev, n)
}

// UpdateNodeDrain sets (drain != nil) or clears a node's drain, with the
// evals the change creates. Setting a drain makes the node ineligible;
// clearing it makes the node eligible again only when markEligible is set.
// ts, the leader's time, becomes the drain's StartedAt when that is unset.
func (s *StateStore) UpdateNodeDrain(index uint64, nodeID string, drain *structs.DrainStrategy, markEligible bool, ts int64, evals ...*structs.Evaluation) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	prev, err := nodeTxn(txn, nodeID)
	if err != nil {
		return err
	}
	if prev == nil {
		return structs.NotFound("node", nodeID)
	}
	n := prev.Copy()
	if drain != nil {
		d := *drain
		if d.StartedAt == 0 {
			d.StartedAt = ts
		}
		n.DrainStrategy = &d
		n.SchedulingEligibility = structs.NodeSchedulingIneligible
	} else {
		n.DrainStrategy = nil
		if markEligible {
			n.SchedulingEligibility = structs.NodeSchedulingEligible
		}
	}
	n.ModifyIndex = index
	if err := txn.Insert(TableNodes, n); err != nil {
		return fmt.Errorf("updating drain of node %q: %w", nodeID, err)
	}
	if err := upsertEvalsTxn(txn, evals); err != nil {
		return err
	}
	return txn.commit()
}

// UpdateNodeEligibility sets a node's scheduling eligibility, with the
// evals the change creates. A draining node cannot be made eligible
// (CodeInvalid): cancel the drain instead. ts is the leader's time; the
// node keeps no record of it today.
func (s *StateStore) UpdateNodeEligibility(index uint64, nodeID, elig string, ts int64, evals ...*structs.Evaluation) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	switch elig {
	case structs.NodeSchedulingEligible, structs.NodeSchedulingIneligible:
	default:
		return structs.NewError(structs.CodeInvalid, "node %q: invalid scheduling eligibility %q (want %s or %s)",
			nodeID, elig, structs.NodeSchedulingEligible, structs.NodeSchedulingIneligible)
	}
	prev, err := nodeTxn(txn, nodeID)
	if err != nil {
		return err
	}
	if prev == nil {
		return structs.NotFound("node", nodeID)
	}
	if prev.DrainStrategy != nil && elig == structs.NodeSchedulingEligible {
		return structs.NewError(structs.CodeInvalid,
			"node %q is draining and cannot be made eligible; cancel the drain first", nodeID)
	}
	n := prev.Copy()
	n.SchedulingEligibility = elig
	n.ModifyIndex = index
	if err := txn.Insert(TableNodes, n); err != nil {
		return fmt.Errorf("updating eligibility of node %q: %w", nodeID, err)
	}
	if err := upsertEvalsTxn(txn, evals); err != nil {
		return err
	}
	return txn.commit()
}

func nodeTxn(txn *writeTxn, id string) (*structs.Node, error) {
	raw, err := txn.First(TableNodes, IndexID, id)
	if err != nil {
		return nil, fmt.Errorf("reading node %q: %w", id, err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.Node), nil
}
