package auth

import (
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/acl"
	"github.com/berth-io/berth/nomad/structs"
)

// mapState is a State over maps, for the resolver alone.
type mapState struct {
	tokens   map[string]*structs.ACLToken // by secret
	policies map[string]*structs.ACLPolicy
	nodes    map[string]*structs.Node // by secret
}

func (m *mapState) ACLTokenBySecret(_ memdb.WatchSet, s string) (*structs.ACLToken, error) {
	return m.tokens[s], nil
}
func (m *mapState) ACLPolicyByName(_ memdb.WatchSet, n string) (*structs.ACLPolicy, error) {
	return m.policies[n], nil
}
func (m *mapState) NodeBySecretID(_ memdb.WatchSet, s string) (*structs.Node, error) {
	return m.nodes[s], nil
}

func testState() *mapState {
	exp := time.Unix(100, 0)
	return &mapState{
		tokens: map[string]*structs.ACLToken{
			"reader-secret":  {AccessorID: "r", Type: structs.ACLClientToken, Policies: []string{"reader"}},
			"expired-secret": {AccessorID: "x", Type: structs.ACLClientToken, Policies: []string{"reader"}, ExpirationTime: &exp},
		},
		policies: map[string]*structs.ACLPolicy{"reader": {Name: "reader", Rules: `namespace "default" { policy = "read" }`, ModifyIndex: 1}},
		nodes:    map[string]*structs.Node{"node-secret": {ID: "n1", SecretID: "node-secret"}},
	}
}

func TestResolve(t *testing.T) {
	r := NewResolver(true)
	st := testState()
	now := time.Unix(200, 0)

	id, err := r.Resolve(st, "reader-secret", now)
	must.NoError(t, err)
	must.True(t, id.ACL.AllowNamespaceOperation("default", acl.CapReadJob))
	must.False(t, id.ACL.AllowNamespaceOperation("default", acl.CapSubmitJob))

	_, err = r.Resolve(st, "expired-secret", now)
	must.ErrorContains(t, err, "expired")
	_, err = r.Resolve(st, "nobody", now)
	must.ErrorIs(t, err, ErrTokenNotFound)

	id, err = r.Resolve(st, "node-secret", now)
	must.NoError(t, err)
	must.Eq(t, "n1", id.Node.ID)
	must.False(t, id.ACL.AllowNamespaceOperation("default", acl.CapReadJob), must.Sprint("a node secret is not a token"))

	// A node acts only for itself.
	e := Lookup(structs.MethodNodeUpdateStatus)
	must.NoError(t, Authorize(e, id, &structs.NodeUpdateStatusRequest{NodeID: "n1"}))
	must.ErrorContains(t, Authorize(e, id, &structs.NodeUpdateStatusRequest{NodeID: "n2"}), "may not act for node n2")

	// A changed policy is re-parsed (the cache keys on ModifyIndex).
	st.policies["reader"] = &structs.ACLPolicy{Name: "reader", Rules: `namespace "default" { policy = "write" }`, ModifyIndex: 2}
	id, err = r.Resolve(st, "reader-secret", now)
	must.NoError(t, err)
	must.True(t, id.ACL.AllowNamespaceOperation("default", acl.CapSubmitJob))
}

// BenchmarkResolveAndAuthorize is what every RPC with a client token pays
// before its endpoint runs (policies cached after the first call).
func BenchmarkResolveAndAuthorize(b *testing.B) {
	r := NewResolver(true)
	st := testState()
	e := Lookup(structs.MethodCSIVolumeList)
	args := &structs.CSIVolumeListRequest{}
	args.AuthToken = "reader-secret"
	now := time.Unix(200, 0)
	for b.Loop() {
		id, err := r.Resolve(st, args.AuthToken, now)
		if err != nil {
			b.Fatal(err)
		}
		if err := Authorize(e, id, args); err != nil {
			b.Fatal(err)
		}
	}
}
