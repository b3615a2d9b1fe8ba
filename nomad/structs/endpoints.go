package structs

// RPC method names, shared by the server's endpoint table, the HTTP API
// and the client so that a renamed method fails to compile rather than
// failing at run time.
const (
	MethodStatusPing   = "Status.Ping"
	MethodStatusLeader = "Status.Leader"
	MethodStatusPeers  = "Status.Peers"

	MethodOperatorRaftGetConfiguration = "Operator.RaftGetConfiguration"
	MethodOperatorRaftAddPeer          = "Operator.RaftAddPeer"
	MethodOperatorRaftRemovePeer       = "Operator.RaftRemovePeer"

	MethodNodeRegister          = "Node.Register"
	MethodNodeGetNode           = "Node.GetNode"
	MethodNodeList              = "Node.List"
	MethodNodeUpdateStatus      = "Node.UpdateStatus"
	MethodNodeGetClientAllocs   = "Node.GetClientAllocs"
	MethodNodeUpdateAlloc       = "Node.UpdateAlloc"
	MethodNodeUpdateDrain       = "Node.UpdateDrain"
	MethodNodeUpdateEligibility = "Node.UpdateEligibility"
	MethodNodeGetAllocs         = "Node.GetAllocs"

	MethodJobRegister    = "Job.Register"
	MethodJobDeregister  = "Job.Deregister"
	MethodJobGetJob      = "Job.GetJob"
	MethodJobList        = "Job.List"
	MethodJobAllocations = "Job.Allocations"
	MethodJobEvaluations = "Job.Evaluations"
	MethodJobPlan        = "Job.Plan"
	// MethodJobGetJobVersions and MethodJobRevert: a job's kept versions.
	MethodJobGetJobVersions = "Job.GetJobVersions"
	MethodJobRevert         = "Job.Revert"
	MethodJobStable         = "Job.Stable"

	MethodAllocGetAlloc = "Alloc.GetAlloc"
	MethodAllocList     = "Alloc.List"
	MethodAllocStop     = "Alloc.Stop"
	MethodAllocRestart  = "Alloc.Restart"
	MethodAllocSignal   = "Alloc.Signal"
	MethodAllocFS       = "Alloc.FS"

	// Node session methods: the leader calls them on a client.
	MethodClientAllocRestart = "ClientAlloc.Restart"
	MethodClientAllocSignal  = "ClientAlloc.Signal"
	MethodClientAllocFS      = "ClientAlloc.FS"

	MethodEvalGetEval = "Eval.GetEval"
	MethodEvalList    = "Eval.List"

	MethodCSIVolumeRegister       = "CSIVolume.Register"
	MethodCSIVolumeDeregister     = "CSIVolume.Deregister"
	MethodCSIVolumeCreate         = "CSIVolume.Create"
	MethodCSIVolumeDelete         = "CSIVolume.Delete"
	MethodCSIVolumeGet            = "CSIVolume.Get"
	MethodCSIVolumeList           = "CSIVolume.List"
	MethodCSIVolumeClaim          = "CSIVolume.Claim"
	MethodCSIVolumeUnpublish      = "CSIVolume.Unpublish"
	MethodCSIVolumeDetach         = "CSIVolume.Detach"
	MethodCSIVolumeReportProgress = "CSIVolume.ReportProgress"
	MethodCSIVolumeReportStats    = "CSIVolume.ReportStats"
	MethodCSIVolumeCreateSnapshot = "CSIVolume.CreateSnapshot"
	MethodCSIVolumeDeleteSnapshot = "CSIVolume.DeleteSnapshot"
	MethodCSIVolumeListSnapshots  = "CSIVolume.ListSnapshots"

	MethodCSIPluginGet  = "CSIPlugin.Get"
	MethodCSIPluginList = "CSIPlugin.List"

	MethodSystemGarbageCollect = "System.GarbageCollect"

	MethodACLBootstrap      = "ACL.Bootstrap"
	MethodACLUpsertPolicies = "ACL.UpsertPolicies"
	MethodACLDeletePolicies = "ACL.DeletePolicies"
	MethodACLGetPolicy      = "ACL.GetPolicy"
	MethodACLListPolicies   = "ACL.ListPolicies"
	MethodACLUpsertTokens   = "ACL.UpsertTokens"
	MethodACLDeleteTokens   = "ACL.DeleteTokens"
	MethodACLGetToken       = "ACL.GetToken"
	MethodACLListTokens     = "ACL.ListTokens"
	MethodACLResolveToken   = "ACL.ResolveToken"
	MethodACLAuthorize      = "ACL.Authorize"
)

// HTTP-only endpoints: served by the agent, authorized through the same
// table via ACL.Authorize.
const (
	HTTPAgentHealth = "HTTP.AgentHealth"
	HTTPAgentSelf   = "HTTP.AgentSelf"
	HTTPMetrics     = "HTTP.Metrics"
	HTTPClientLogs  = "HTTP.ClientFSLogs"
	HTTPAuditLog    = "HTTP.AuditLog"

	// The event stream is authorized per topic family: jobs, allocs and
	// evals (read-job), nodes (node read), volumes and claims
	// (csi-read-volume), plugins (plugin read).
	HTTPEventStream       = "HTTP.EventStream"
	HTTPEventStreamNode   = "HTTP.EventStreamNode"
	HTTPEventStreamVolume = "HTTP.EventStreamVolume"
	HTTPEventStreamPlugin = "HTTP.EventStreamPlugin"
	// HTTPEventStreamAllNamespaces is namespace=*: events of every
	// namespace, which one namespace's capabilities cannot vouch for.
	HTTPEventStreamAllNamespaces = "HTTP.EventStreamAllNamespaces"
	HTTPJobsParse                = "HTTP.JobsParse"
	HTTPClientStats              = "HTTP.ClientStats"
	// HTTPClientAllocStats is authorized in the alloc's own namespace.
	HTTPClientAllocStats = "HTTP.ClientAllocStats"
	// HTTPClientAllocExec runs a command in an alloc's task; a raw_exec
	// task, which runs on the host, needs HTTPClientAllocNodeExec.
	HTTPClientAllocExec     = "HTTP.ClientAllocExec"
	HTTPClientAllocNodeExec = "HTTP.ClientAllocNodeExec"
	// HTTPClientFS reads an alloc's files (alloc fs).
	HTTPClientFS = "HTTP.ClientFS"
	// HTTPAgentMonitor streams the agent's log.
	HTTPAgentMonitor = "HTTP.AgentMonitor"
)

// ACLAuthorizeRequest asks whether the token may call Endpoint (an
// HTTP-only endpoint of the table) in Namespace.
type ACLAuthorizeRequest struct {
	Endpoint string
	// AllocID, when set, names the alloc the request is about: the server
	// checks the alloc's own namespace, not one the caller names.
	AllocID string
	QueryOptions
}

// ACLAuthorizeResponse is ACL.Authorize's reply: a nil error means yes.
type ACLAuthorizeResponse struct {
	AccessorID string
	QueryMeta
}
