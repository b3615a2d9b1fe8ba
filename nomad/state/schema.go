package state

import (
	"encoding/binary"
	"fmt"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/structs"
)

// Table names. They are also the keys of the index table, so
// Index(TableNodes) is the Raft index of the last write to the nodes table.
const (
	TableNodes       = "nodes"
	TableJobs        = "jobs"
	TableJobVersions = "job_versions"
	TableAllocs      = "allocs"
	TableEvals       = "evals"
	TableCSIVolumes  = "csi_volumes"
	TableCSIPlugins  = "csi_plugins"
	// TableCSIPluginInstances holds each node's instances of each plugin
	// (structs.CSIPluginInstance); csi_plugins keeps a summary row per
	// plugin.
	TableCSIPluginInstances = "csi_plugin_instances"
	TableIndex              = "index"
	TableACLPolicies        = "acl_policies"
	TableACLTokens          = "acl_tokens"
)

// Index names. Every table has IndexID; append "_prefix" to an index name
// in a memdb Get to scan by prefix.
const (
	IndexID        = "id"
	IndexSecretID  = "secret_id"
	IndexJob       = "job"
	IndexNode      = "node"
	IndexNamespace = "namespace"
	IndexPluginID  = "plugin_id"
	IndexModify    = "modify_index"
	// IndexDraining indexes nodes by whether they drain.
	IndexDraining = "draining"
	// IndexController indexes the plugin instance rows that hold a
	// controller, by plugin ID.
	IndexController = "controller"

	prefixSuffix = "_prefix"
)

// IndexEntry is one row of the index table: the Raft index of the latest
// write to table Key.
type IndexEntry struct {
	Key   string
	Value uint64
}

// schema returns the go-memdb schema of the state store.
func schema() *memdb.DBSchema {
	str := func(field string) *memdb.StringFieldIndex {
		return &memdb.StringFieldIndex{Field: field}
	}
	nsAnd := func(field string) *memdb.CompoundIndex {
		return &memdb.CompoundIndex{Indexes: []memdb.Indexer{str("Namespace"), str(field)}}
	}
	return &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		TableNodes: {
			Name: TableNodes,
			Indexes: map[string]*memdb.IndexSchema{
				IndexID:       {Name: IndexID, Unique: true, Indexer: str("ID")},
				IndexSecretID: {Name: IndexSecretID, AllowMissing: true, Indexer: str("SecretID")},
				IndexModify:   {Name: IndexModify, Indexer: modifyIndexIndex{}},
				IndexDraining: {Name: IndexDraining, Indexer: &memdb.ConditionalIndex{Conditional: func(raw any) (bool, error) {
					n, ok := raw.(*structs.Node)
					if !ok {
						return false, fmt.Errorf("draining index: unexpected type %T", raw)
					}
					return n.DrainStrategy != nil, nil
				}}},
			},
		},
		TableJobs: {
			Name: TableJobs,
			Indexes: map[string]*memdb.IndexSchema{
				IndexID: {Name: IndexID, Unique: true, Indexer: nsAnd("ID")},
			},
		},
		TableJobVersions: {
			Name: TableJobVersions,
			Indexes: map[string]*memdb.IndexSchema{
				IndexID: {Name: IndexID, Unique: true, Indexer: &memdb.CompoundIndex{
					Indexes: []memdb.Indexer{str("Namespace"), str("ID"), &memdb.UintFieldIndex{Field: "Version"}},
				}},
				IndexJob: {Name: IndexJob, Indexer: nsAnd("ID")},
			},
		},
		TableAllocs: {
			Name: TableAllocs,
			Indexes: map[string]*memdb.IndexSchema{
				IndexID:   {Name: IndexID, Unique: true, Indexer: str("ID")},
				IndexJob:  {Name: IndexJob, AllowMissing: true, Indexer: nsAnd("JobID")},
				IndexNode: {Name: IndexNode, AllowMissing: true, Indexer: str("NodeID")},
			},
		},
		TableEvals: {
			Name: TableEvals,
			Indexes: map[string]*memdb.IndexSchema{
				IndexID:        {Name: IndexID, Unique: true, Indexer: str("ID")},
				IndexJob:       {Name: IndexJob, AllowMissing: true, Indexer: nsAnd("JobID")},
				IndexNamespace: {Name: IndexNamespace, AllowMissing: true, Indexer: str("Namespace")},
			},
		},
		TableCSIVolumes: {
			Name: TableCSIVolumes,
			Indexes: map[string]*memdb.IndexSchema{
				IndexID:       {Name: IndexID, Unique: true, Indexer: volumeIDIndex{}},
				IndexPluginID: {Name: IndexPluginID, AllowMissing: true, Indexer: volumePluginIndex{}},
				IndexNode:     {Name: IndexNode, AllowMissing: true, Indexer: claimNodesIndex{}},
				IndexModify:   {Name: IndexModify, Indexer: modifyIndexIndex{}},
			},
		},
		TableCSIPlugins: {
			Name: TableCSIPlugins,
			Indexes: map[string]*memdb.IndexSchema{
				IndexID: {Name: IndexID, Unique: true, Indexer: str("ID")},
			},
		},
		TableCSIPluginInstances: {
			Name: TableCSIPluginInstances,
			Indexes: map[string]*memdb.IndexSchema{
				IndexID:         {Name: IndexID, Unique: true, Indexer: instanceIDIndex{}},
				IndexController: {Name: IndexController, AllowMissing: true, Indexer: instanceControllerIndex{}},
			},
		},
		TableACLPolicies: {
			Name: TableACLPolicies,
			Indexes: map[string]*memdb.IndexSchema{
				IndexID: {Name: IndexID, Unique: true, Indexer: str("Name")},
			},
		},
		TableACLTokens: {
			Name: TableACLTokens,
			Indexes: map[string]*memdb.IndexSchema{
				IndexID:       {Name: IndexID, Unique: true, Indexer: str("AccessorID")},
				IndexSecretID: {Name: IndexSecretID, Unique: true, Indexer: str("SecretHash")},
			},
		},
		TableIndex: {
			Name: TableIndex,
			Indexes: map[string]*memdb.IndexSchema{
				IndexID: {Name: IndexID, Unique: true, Indexer: str("Key")},
			},
		},
	}}
}

// claimNodesIndex indexes a CSI volume under the node ID of each of its
// live claims, so CSIVolumesByNodeID finds the volumes a node holds. A
// freed claim leaves Claims, and with it this index.
type claimNodesIndex struct{}

var _ memdb.MultiIndexer = claimNodesIndex{}

func (claimNodesIndex) FromObject(raw any) (bool, [][]byte, error) {
	v, ok := raw.(*structs.CSIVolume)
	if !ok {
		return false, nil, fmt.Errorf("claim node index: unexpected type %T", raw)
	}
	seen := make(map[string]bool, len(v.Claims))
	var vals [][]byte
	for _, c := range v.Claims {
		if c == nil || c.NodeID == "" || seen[c.NodeID] {
			continue
		}
		seen[c.NodeID] = true
		vals = append(vals, nulTerminated(c.NodeID))
	}
	return len(vals) > 0, vals, nil
}

func (claimNodesIndex) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("claim node index: want 1 argument, got %d", len(args))
	}
	id, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("claim node index: argument must be a string, got %T", args[0])
	}
	return []byte(id + "\x00"), nil
}

// modifyIndexIndex indexes a CSI volume or a node by its ModifyIndex,
// big-endian so that the keys sort as the indexes do (memdb's
// UintFieldIndex writes varints, which do not): CSIVolumesModifiedSince
// and NodesModifiedSince read only the objects written after an index
// instead of the whole table.
type modifyIndexIndex struct{}

var _ memdb.SingleIndexer = modifyIndexIndex{}

func (modifyIndexIndex) FromObject(raw any) (bool, []byte, error) {
	var idx uint64
	switch o := raw.(type) {
	case *structs.CSIVolume:
		idx = o.ModifyIndex
	case *structs.Node:
		idx = o.ModifyIndex
	default:
		return false, nil, fmt.Errorf("modify index index: unexpected type %T", raw)
	}
	return true, binary.BigEndian.AppendUint64(nil, idx), nil
}

func (modifyIndexIndex) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("modify index index: want 1 argument, got %d", len(args))
	}
	idx, ok := args[0].(uint64)
	if !ok {
		return nil, fmt.Errorf("modify index index: argument must be a uint64, got %T", args[0])
	}
	return binary.BigEndian.AppendUint64(nil, idx), nil
}

// volumeIDIndex is the csi_volumes primary index: Namespace, NUL, ID,
// NUL, the bytes memdb's CompoundIndex of two StringFieldIndex writes
// (TestVolumeIndexes_SameKeysAsReflection holds it to them), built in one
// allocation without reflection. The compound took ~7 allocations per
// key, and a 1,000-volume register builds ~4,000 keys of this index.
type volumeIDIndex struct{}

var (
	_ memdb.SingleIndexer = volumeIDIndex{}
	_ memdb.PrefixIndexer = volumeIDIndex{}
)

func (volumeIDIndex) FromObject(raw any) (bool, []byte, error) {
	v, ok := raw.(*structs.CSIVolume)
	if !ok {
		return false, nil, fmt.Errorf("volume id index: unexpected type %T", raw)
	}
	if v.Namespace == "" || v.ID == "" {
		return false, nil, nil
	}
	return true, nulTerminated(v.Namespace, v.ID), nil
}

func (volumeIDIndex) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("volume id index: want 2 arguments (namespace, id), got %d", len(args))
	}
	ns, id, err := twoStrings(args[0], args[1])
	if err != nil {
		return nil, err
	}
	return nulTerminated(ns, id), nil
}

// PrefixFromArgs takes the namespace and an ID prefix (or the start of
// a namespace alone): every argument but the last whole, as
// CompoundIndex.PrefixFromArgs does.
func (volumeIDIndex) PrefixFromArgs(args ...any) ([]byte, error) {
	switch len(args) {
	case 0:
		return nil, nil
	case 1:
		ns, ok := args[0].(string)
		if !ok {
			return nil, fmt.Errorf("volume id index: argument must be a string, got %T", args[0])
		}
		return []byte(ns), nil
	case 2:
		ns, prefix, err := twoStrings(args[0], args[1])
		if err != nil {
			return nil, err
		}
		out := make([]byte, 0, len(ns)+1+len(prefix))
		return append(append(append(out, ns...), 0), prefix...), nil
	default:
		return nil, fmt.Errorf("volume id index: want at most 2 arguments (namespace, id prefix), got %d", len(args))
	}
}

// volumePluginIndex is csi_volumes' plugin_id index: PluginID, NUL, as
// StringFieldIndex writes it, without reflection.
type volumePluginIndex struct{}

var _ memdb.SingleIndexer = volumePluginIndex{}

func (volumePluginIndex) FromObject(raw any) (bool, []byte, error) {
	v, ok := raw.(*structs.CSIVolume)
	if !ok {
		return false, nil, fmt.Errorf("volume plugin index: unexpected type %T", raw)
	}
	if v.PluginID == "" {
		return false, nil, nil
	}
	return true, nulTerminated(v.PluginID), nil
}

func (volumePluginIndex) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("volume plugin index: want 1 argument, got %d", len(args))
	}
	id, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("volume plugin index: argument must be a string, got %T", args[0])
	}
	return nulTerminated(id), nil
}

// instanceIDIndex is csi_plugin_instances' primary index: PluginID, NUL,
// NodeID, NUL. Its prefix form takes a whole plugin ID (every instance of
// that plugin, and of no other whose ID merely starts the same).
type instanceIDIndex struct{}

var (
	_ memdb.SingleIndexer = instanceIDIndex{}
	_ memdb.PrefixIndexer = instanceIDIndex{}
)

func (instanceIDIndex) FromObject(raw any) (bool, []byte, error) {
	in, ok := raw.(*structs.CSIPluginInstance)
	if !ok {
		return false, nil, fmt.Errorf("plugin instance index: unexpected type %T", raw)
	}
	if in.PluginID == "" || in.NodeID == "" {
		return false, nil, nil
	}
	return true, nulTerminated(in.PluginID, in.NodeID), nil
}

func (instanceIDIndex) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("plugin instance index: want 2 arguments (plugin, node), got %d", len(args))
	}
	plugin, node, err := twoStrings(args[0], args[1])
	if err != nil {
		return nil, err
	}
	return nulTerminated(plugin, node), nil
}

func (instanceIDIndex) PrefixFromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("plugin instance index: want 1 argument (plugin), got %d", len(args))
	}
	id, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("plugin instance index: argument must be a string, got %T", args[0])
	}
	return nulTerminated(id), nil
}

// instanceControllerIndex indexes the instance rows with a controller by
// plugin ID: the controllers of a plugin are read without walking its
// node instances, one per node of the cluster.
type instanceControllerIndex struct{}

var _ memdb.SingleIndexer = instanceControllerIndex{}

func (instanceControllerIndex) FromObject(raw any) (bool, []byte, error) {
	in, ok := raw.(*structs.CSIPluginInstance)
	if !ok {
		return false, nil, fmt.Errorf("plugin controller index: unexpected type %T", raw)
	}
	if in.Controller == nil || in.PluginID == "" {
		return false, nil, nil
	}
	return true, nulTerminated(in.PluginID), nil
}

func (instanceControllerIndex) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("plugin controller index: want 1 argument, got %d", len(args))
	}
	id, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("plugin controller index: argument must be a string, got %T", args[0])
	}
	return nulTerminated(id), nil
}

func twoStrings(a, b any) (string, string, error) {
	s1, ok1 := a.(string)
	s2, ok2 := b.(string)
	if !ok1 || !ok2 {
		return "", "", fmt.Errorf("volume id index: arguments must be strings, got %T and %T", a, b)
	}
	return s1, s2, nil
}

// nulTerminated is each part followed by a NUL, in one allocation.
func nulTerminated(parts ...string) []byte {
	n := 0
	for _, p := range parts {
		n += len(p) + 1
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(append(out, p...), 0)
	}
	return out
}
