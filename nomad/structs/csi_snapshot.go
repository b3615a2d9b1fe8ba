package structs

// CSISnapshot is a snapshot of a volume as its storage provider has it.
// Berth does not keep snapshots in Raft: the plugin is the source of truth
// and `volume snapshot list` asks it.
type CSISnapshot struct {
	ID                     string // the provider's snapshot ID
	ExternalSourceVolumeID string // the provider's ID of the source volume
	SourceVolumeID         string // Berth's volume ID (create: the volume to snapshot)
	PluginID               string
	SizeBytes              int64
	CreateTime             int64 // unix seconds, as the provider said; 0 when it did not
	IsReady                bool

	// Only for create: the snapshot's name (the idempotency key; the
	// volume ID and a timestamp when empty), secrets and parameters.
	Name       string
	Secrets    CSISecrets
	Parameters map[string]string
}

// CSISnapshotCreateRequest snapshots volumes (Snapshots[i].SourceVolumeID
// in the request's namespace).
type CSISnapshotCreateRequest struct {
	Snapshots []*CSISnapshot
	WriteRequest
}

// CSISnapshotCreateResponse has the snapshots as the providers made them.
type CSISnapshotCreateResponse struct {
	Snapshots []*CSISnapshot
	WriteMeta
}

// CSISnapshotDeleteRequest deletes snapshots (ID and PluginID each).
type CSISnapshotDeleteRequest struct {
	Snapshots []*CSISnapshot
	WriteRequest
}

// CSISnapshotListRequest asks a plugin for one page of its snapshots.
type CSISnapshotListRequest struct {
	PluginID string
	Secrets  CSISecrets
	QueryOptions
}

// CSISnapshotListResponse is one page; NextToken continues it.
type CSISnapshotListResponse struct {
	Snapshots []*CSISnapshot
	NextToken string
	QueryMeta
}

// ClientCSIControllerSnapshotRequest is a snapshot call on a controller
// plugin through its client: create (ExternalID is the source volume),
// delete (SnapshotID) or list (MaxEntries, StartingToken).
type ClientCSIControllerSnapshotRequest struct {
	ClientCSIControllerRequest
	Name          string
	Parameters    map[string]string
	SnapshotID    string
	MaxEntries    int32
	StartingToken string
}

// ClientCSIControllerSnapshotResponse carries what the plugin answered.
type ClientCSIControllerSnapshotResponse struct {
	Snapshots []*CSISnapshot
	NextToken string
}
