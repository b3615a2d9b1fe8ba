// Package auth is the one place the server decides who may call what. It
// holds the endpoint table — every RPC method and HTTP-only endpoint with
// whether it writes, whether followers forward it, and the rule a caller
// must pass — and resolves a request's secret to an identity (an ACL
// token's compiled policies, or a client node). The server's RPC codec
// runs Authorize on every decoded request before the endpoint sees it, so
// an endpoint without a rule cannot be reached at all.
package auth

import (
	"fmt"
	"sort"

	"github.com/berth-io/berth/nomad/acl"
	"github.com/berth-io/berth/nomad/structs"
)

// Kind says which part of a policy an endpoint's rule consults.
type Kind int

const (
	// Public endpoints need no token: cluster status and health.
	Public Kind = iota
	// Namespace endpoints need Cap in the request's namespace and in the
	// namespace of every object the request names.
	Namespace
	// NodeRead and NodeWrite need the node policy.
	NodeRead
	NodeWrite
	// OperatorRead and OperatorWrite need the operator policy.
	OperatorRead
	OperatorWrite
	// AgentRead needs the agent policy.
	AgentRead
	// PluginList and PluginRead need the plugin policy.
	PluginList
	PluginRead
	// Management needs a management token.
	Management
	// NodeOnly needs the calling node's own secret: the client's RPCs.
	NodeOnly
	// AnyToken needs a valid token of any kind (or the anonymous policy);
	// the endpoint then decides what to show (e.g. token/self).
	AnyToken
)

var kindNames = map[Kind]string{
	Public: "public", Namespace: "namespace", NodeRead: "node:read", NodeWrite: "node:write",
	OperatorRead: "operator:read", OperatorWrite: "operator:write", AgentRead: "agent:read",
	PluginList: "plugin:list", PluginRead: "plugin:read", Management: "management",
	NodeOnly: "node secret", AnyToken: "any token",
}

func (k Kind) String() string { return kindNames[k] }

// Rule is what a caller must hold.
type Rule struct {
	Kind Kind
	// Cap is the namespace capability for Kind Namespace.
	Cap string
	// AllowNode lets a client node's secret pass as well (e.g. a client
	// reading the volume it is about to mount).
	AllowNode bool
	// Extra adds checks that depend on the request's content (a job that
	// mounts CSI volumes also needs csi-mount-volume; detach -force needs
	// node write). It runs after the rule passed.
	Extra func(c *Check, args any) error
}

// Endpoint is one row of the table.
type Endpoint struct {
	Method string
	Write  bool
	// Forward says followers send the request to the leader (writes, and
	// reads unless stale). Local endpoints answer on whichever server.
	Forward bool
	// HTTPOnly endpoints are served by the agent, not by RPC; the agent
	// asks ACL.Authorize with the endpoint's name.
	HTTPOnly bool
	Rule     Rule
	// Audit says a successful call is written to the audit log. Every
	// write is audited except the client's own node traffic.
	Audit bool
}

func read(method string, r Rule) Endpoint { return Endpoint{Method: method, Forward: true, Rule: r} }
func write(method string, r Rule) Endpoint {
	return Endpoint{Method: method, Write: true, Forward: true, Rule: r, Audit: true}
}
func nodeWrite(method string) Endpoint {
	return Endpoint{Method: method, Write: true, Forward: true, Rule: Rule{Kind: NodeOnly}}
}
func ns(cap string) Rule        { return Rule{Kind: Namespace, Cap: cap} }
func nsOrNode(cap string) Rule  { return Rule{Kind: Namespace, Cap: cap, AllowNode: true} }
func kind(k Kind) Rule          { return Rule{Kind: k} }
func local(e Endpoint) Endpoint { e.Forward = false; return e }
func httpOnly(method string, r Rule) Endpoint {
	return Endpoint{Method: method, HTTPOnly: true, Rule: r}
}

// table is every endpoint Berth serves. TestTable_EveryTokenKind walks it
// and the server refuses to start if an RPC method has no row.
var table = []Endpoint{
	local(read(structs.MethodStatusPing, kind(Public))),
	local(read(structs.MethodStatusLeader, kind(Public))),
	local(read(structs.MethodStatusPeers, kind(Public))),

	read(structs.MethodOperatorRaftGetConfiguration, kind(OperatorRead)),
	write(structs.MethodOperatorRaftAddPeer, kind(OperatorWrite)),
	write(structs.MethodOperatorRaftRemovePeer, kind(OperatorWrite)),

	// Node.Register is open for a node's first registration; a node that
	// exists must present its own secret (checked by the endpoint, which
	// knows whether the node exists).
	{Method: structs.MethodNodeRegister, Write: true, Forward: true, Rule: kind(Public)},
	{Method: structs.MethodNodeUpdateStatus, Write: true, Forward: true, Rule: kind(NodeOnly)},
	read(structs.MethodNodeGetClientAllocs, kind(NodeOnly)),
	nodeWrite(structs.MethodNodeUpdateAlloc),
	read(structs.MethodNodeGetNode, Rule{Kind: NodeRead, AllowNode: true}),
	read(structs.MethodNodeList, kind(NodeRead)),
	read(structs.MethodNodeGetAllocs, kind(NodeRead)),
	write(structs.MethodNodeUpdateDrain, kind(NodeWrite)),
	write(structs.MethodNodeUpdateEligibility, kind(NodeWrite)),

	write(structs.MethodJobRegister, Rule{Kind: Namespace, Cap: acl.CapSubmitJob, Extra: jobVolumes}),
	write(structs.MethodJobDeregister, ns(acl.CapSubmitJob)),
	read(structs.MethodJobPlan, Rule{Kind: Namespace, Cap: acl.CapSubmitJob, Extra: jobVolumes}),
	read(structs.MethodJobGetJob, ns(acl.CapReadJob)),
	read(structs.MethodJobList, ns(acl.CapListJobs)),
	read(structs.MethodJobAllocations, ns(acl.CapReadJob)),
	read(structs.MethodJobEvaluations, ns(acl.CapReadJob)),
	read(structs.MethodJobGetJobVersions, ns(acl.CapReadJob)),
	// Revert also authorizes the spec it restores as Job.Register.
	write(structs.MethodJobRevert, ns(acl.CapSubmitJob)),
	write(structs.MethodJobStable, ns(acl.CapSubmitJob)),

	read(structs.MethodAllocGetAlloc, nsOrNode(acl.CapReadJob)),
	read(structs.MethodAllocList, ns(acl.CapReadJob)),
	// The endpoints also check alloc-lifecycle in the alloc's own namespace.
	write(structs.MethodAllocStop, ns(acl.CapAllocLifecycle)),
	write(structs.MethodAllocRestart, ns(acl.CapAllocLifecycle)),
	write(structs.MethodAllocSignal, ns(acl.CapAllocLifecycle)),
	read(structs.MethodAllocFS, ns(acl.CapReadFS)),
	read(structs.MethodEvalGetEval, ns(acl.CapReadJob)),
	read(structs.MethodEvalList, ns(acl.CapReadJob)),

	write(structs.MethodCSIVolumeRegister, ns(acl.CapCSIWriteVolume)),
	write(structs.MethodCSIVolumeDeregister, ns(acl.CapCSIWriteVolume)),
	write(structs.MethodCSIVolumeCreate, ns(acl.CapCSIWriteVolume)),
	write(structs.MethodCSIVolumeDelete, ns(acl.CapCSIWriteVolume)),
	write(structs.MethodCSIVolumeDetach, Rule{Kind: Namespace, Cap: acl.CapCSIWriteVolume, Extra: detachForce}),
	read(structs.MethodCSIVolumeGet, nsOrNode(acl.CapCSIReadVolume)),
	read(structs.MethodCSIVolumeList, ns(acl.CapCSIListVolume)),
	nodeWrite(structs.MethodCSIVolumeClaim),
	nodeWrite(structs.MethodCSIVolumeUnpublish),
	nodeWrite(structs.MethodCSIVolumeReportProgress),
	nodeWrite(structs.MethodCSIVolumeReportStats),
	write(structs.MethodCSIVolumeCreateSnapshot, ns(acl.CapCSIWriteVolume)),
	write(structs.MethodCSIVolumeDeleteSnapshot, ns(acl.CapCSIWriteVolume)),
	read(structs.MethodCSIVolumeListSnapshots, ns(acl.CapCSIListVolume)),

	read(structs.MethodCSIPluginGet, kind(PluginRead)),
	read(structs.MethodCSIPluginList, kind(PluginList)),

	write(structs.MethodSystemGarbageCollect, kind(Management)),

	// Bootstrap is open: the state store lets it succeed once.
	{Method: structs.MethodACLBootstrap, Write: true, Forward: true, Rule: kind(Public), Audit: true},
	write(structs.MethodACLUpsertPolicies, kind(Management)),
	write(structs.MethodACLDeletePolicies, kind(Management)),
	write(structs.MethodACLUpsertTokens, kind(Management)),
	write(structs.MethodACLDeleteTokens, kind(Management)),
	read(structs.MethodACLListTokens, kind(Management)),
	// A token may read itself and the policies it holds; the endpoints
	// narrow what AnyToken lets through.
	read(structs.MethodACLGetPolicy, kind(AnyToken)),
	read(structs.MethodACLListPolicies, kind(AnyToken)),
	read(structs.MethodACLGetToken, kind(AnyToken)),
	local(read(structs.MethodACLResolveToken, kind(AnyToken))),
	// Authorize applies the named HTTP-only endpoint's rule itself.
	local(read(structs.MethodACLAuthorize, kind(Public))),

	httpOnly(structs.HTTPAgentHealth, kind(Public)),
	httpOnly(structs.HTTPMetrics, kind(Public)),
	httpOnly(structs.HTTPAgentSelf, kind(AgentRead)),
	httpOnly(structs.HTTPClientLogs, ns(acl.CapReadLogs)),
	httpOnly(structs.HTTPAuditLog, kind(Management)),
	httpOnly(structs.HTTPEventStream, ns(acl.CapReadJob)),
	httpOnly(structs.HTTPEventStreamNode, kind(NodeRead)),
	httpOnly(structs.HTTPEventStreamVolume, ns(acl.CapCSIReadVolume)),
	httpOnly(structs.HTTPEventStreamPlugin, kind(PluginRead)),
	httpOnly(structs.HTTPEventStreamAllNamespaces, kind(Management)),
	httpOnly(structs.HTTPJobsParse, ns(acl.CapParseJob)),
	httpOnly(structs.HTTPClientStats, kind(NodeRead)),
	httpOnly(structs.HTTPClientAllocStats, ns(acl.CapReadJob)),
	httpOnly(structs.HTTPClientAllocExec, ns(acl.CapAllocExec)),
	httpOnly(structs.HTTPClientAllocNodeExec, ns(acl.CapAllocNodeExec)),
	httpOnly(structs.HTTPClientFS, ns(acl.CapReadFS)),
	httpOnly(structs.HTTPAgentMonitor, kind(AgentRead)),
}

var byMethod = func() map[string]*Endpoint {
	m := make(map[string]*Endpoint, len(table))
	for i := range table {
		e := &table[i]
		if _, dup := m[e.Method]; dup {
			panic(fmt.Sprintf("auth: endpoint %s is in the table twice", e.Method))
		}
		m[e.Method] = e
	}
	return m
}()

// Lookup returns the endpoint's row, or nil.
func Lookup(method string) *Endpoint { return byMethod[method] }

// Endpoints returns every row, sorted by method.
func Endpoints() []Endpoint {
	out := append([]Endpoint(nil), table...)
	sort.Slice(out, func(i, j int) bool { return out[i].Method < out[j].Method })
	return out
}
