package nomad_test

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil/cluster"
)

// Node identity with ACLs on. The anonymous policy here grants every
// namespace, node and operator right, so the shared helpers (which send no
// token) can set up jobs and volumes; node-only RPCs must still come with
// the node's own secret, which no policy can stand in for.
func identityServer(t *testing.T) (*cluster.Server, string) {
	t.Helper()
	s := csiServer(t, nil, func(c *nomad.Config) { c.ACLEnabled = true })
	var reply structs.ACLTokenUpsertResponse
	must.NoError(t, s.RPC(structs.MethodACLBootstrap, &structs.ACLTokenBootstrapRequest{}, &reply))
	mgmt := reply.Tokens[0].SecretID
	applyPolicy(t, s, mgmt, structs.AnonymousPolicyName, `
namespace "*" { policy = "write" }
node { policy = "write" }
operator { policy = "write" }
plugin { policy = "read" }
`)
	return s, mgmt
}

// joinAs registers n and heartbeats it with its own secret.
func joinAs(t *testing.T, s *cluster.Server, n *structs.Node) {
	t.Helper()
	reg := &structs.NodeRegisterRequest{Node: n}
	reg.AuthToken = n.SecretID
	must.NoError(t, s.RPC(structs.MethodNodeRegister, reg, &structs.NodeUpdateResponse{}))
	must.NoError(t, updateStatus(s, n.ID, structs.NodeStatusReady, n.SecretID))
}

func updateStatus(s *cluster.Server, nodeID, status, secret string) error {
	req := &structs.NodeUpdateStatusRequest{NodeID: nodeID, Status: status}
	req.AuthToken = secret
	return s.RPC(structs.MethodNodeUpdateStatus, req, &structs.NodeUpdateResponse{})
}

func mustDeny(t *testing.T, err error, what string) {
	t.Helper()
	must.Eq(t, structs.CodePermissionDenied, structs.CodeOf(err), must.Sprintf("%s: err=%v", what, err))
}

func TestNodeIdentity_ForgedRegisterIsRefusedAndTheRealClientKeepsWorking(t *testing.T) {
	s, _ := identityServer(t)
	real := csiNode(1, false)
	joinAs(t, s, real)

	forged := csiNode(1, false)
	forged.SecretID = "attacker-secret"
	forged.Name = "evil"
	reg := &structs.NodeRegisterRequest{Node: forged}
	reg.AuthToken = forged.SecretID
	mustDeny(t, s.RPC(structs.MethodNodeRegister, reg, &structs.NodeUpdateResponse{}), "re-register with another secret")

	stored, err := s.State().NodeByID(nil, real.ID)
	must.NoError(t, err)
	must.Eq(t, real.SecretID, stored.SecretID)
	must.Eq(t, "node-1", stored.Name)
	// The real client still heartbeats and re-registers.
	must.NoError(t, updateStatus(s, real.ID, structs.NodeStatusReady, real.SecretID))
	reg = &structs.NodeRegisterRequest{Node: real}
	reg.AuthToken = real.SecretID
	must.NoError(t, s.RPC(structs.MethodNodeRegister, reg, &structs.NodeUpdateResponse{}))
}

func TestNodeIdentity_NodeRPCsNeedTheNodesOwnSecret(t *testing.T) {
	s, mgmt := identityServer(t)
	n1, n2 := csiNode(1, false), csiNode(2, false)
	joinAs(t, s, n1)
	joinAs(t, s, n2)
	a := claimedAlloc(t, s, "web")
	owner, other := n1, n2
	if a.NodeID == n2.ID {
		owner, other = n2, n1
	}

	for _, c := range []struct{ name, secret string }{
		{"no secret", ""}, {"wrong secret", "not-a-secret"}, {"management token", mgmt}, {"another node's secret", other.SecretID},
	} {
		mustDeny(t, updateStatus(s, owner.ID, structs.NodeStatusDown, c.secret), "UpdateStatus with "+c.name)

		upd := &structs.AllocUpdateRequest{Alloc: []*structs.Allocation{{ID: a.ID, NodeID: owner.ID, ClientStatus: structs.AllocClientStatusFailed}}}
		upd.AuthToken = c.secret
		mustDeny(t, s.RPC(structs.MethodNodeUpdateAlloc, upd, &structs.GenericResponse{}), "UpdateAlloc with "+c.name)

		ga := &structs.NodeSpecificRequest{NodeID: owner.ID, SecretID: owner.SecretID}
		ga.AuthToken = c.secret
		mustDeny(t, s.RPC(structs.MethodNodeGetClientAllocs, ga, &structs.NodeAllocsResponse{}), "GetClientAllocs with "+c.name)

		cl := claimRequest("db", a)
		cl.AuthToken = c.secret
		err := s.RPC("CSIVolume.Claim", cl, &structs.CSIVolumeClaimResponse{})
		mustDeny(t, err, "Claim with "+c.name)

		un := &structs.CSIVolumeUnpublishRequest{VolumeID: "db", AllocationID: a.ID, NodeID: owner.ID}
		un.AuthToken = c.secret
		mustDeny(t, s.RPC(structs.MethodCSIVolumeUnpublish, un, &structs.GenericResponse{}), "Unpublish with "+c.name)
	}
	// Nothing above changed the alloc or the claim.
	must.Eq(t, structs.CSIClaimReserved, storedClaim(t, s, "db", a.ID).Step)
	stored, err := s.State().AllocByID(nil, a.ID)
	must.NoError(t, err)
	must.NotEq(t, structs.AllocClientStatusFailed, stored.ClientStatus)

	// The other node, with its own secret and its own ID, still cannot
	// claim for an alloc placed on the owner.
	cl := claimRequest("db", a)
	cl.NodeID = other.ID
	cl.AuthToken = other.SecretID
	_, err = csiClaim(s, cl)
	must.Error(t, err)
	must.Eq(t, structs.CSIClaimReserved, storedClaim(t, s, "db", a.ID).Step)

	// The owner, with its secret, claims; the reply carries the volume's
	// secrets to it and to nobody else.
	cl = claimRequest("db", a)
	cl.AuthToken = owner.SecretID
	reply, err := csiClaim(s, cl)
	must.NoError(t, err)
	must.NotNil(t, reply.Volume)
	must.Eq(t, "hunter2", reply.Volume.Secrets["password"])

	get := &structs.CSIVolumeGetRequest{ID: "db"}
	var gr structs.CSIVolumeGetResponse
	for _, secret := range []string{"", mgmt, other.SecretID, owner.SecretID} {
		get.AuthToken = secret
		must.NoError(t, s.RPC(structs.MethodCSIVolumeGet, get, &gr))
		must.MapEmpty(t, gr.Volume.Secrets)
	}
}
