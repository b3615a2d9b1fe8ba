package nomad_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/auth"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
	"github.com/berth-io/berth/testutil/cluster"
)

// aclServer starts one server with ACLs on and bootstraps it, returning
// the management secret.
func aclServer(t *testing.T) (*cluster.Server, string) {
	t.Helper()
	s := cluster.NewServer(t, func(c *nomad.Config) { c.ACLEnabled = true })
	var reply structs.ACLTokenUpsertResponse
	must.NoError(t, s.RPC(structs.MethodACLBootstrap, &structs.ACLTokenBootstrapRequest{}, &reply))
	must.Len(t, 1, reply.Tokens)
	must.UUIDv4(t, reply.Tokens[0].SecretID)
	return s, reply.Tokens[0].SecretID
}

func applyPolicy(t *testing.T, s *cluster.Server, mgmt, name, rules string) {
	t.Helper()
	req := &structs.ACLPolicyUpsertRequest{Policies: []*structs.ACLPolicy{{Name: name, Rules: rules}}}
	req.AuthToken = mgmt
	must.NoError(t, s.RPC(structs.MethodACLUpsertPolicies, req, &structs.GenericResponse{}))
}

func createToken(t *testing.T, s *cluster.Server, mgmt, name string, policies ...string) string {
	t.Helper()
	req := &structs.ACLTokenUpsertRequest{Tokens: []*structs.ACLToken{{Name: name, Type: structs.ACLClientToken, Policies: policies}}}
	req.AuthToken = mgmt
	var reply structs.ACLTokenUpsertResponse
	must.NoError(t, s.RPC(structs.MethodACLUpsertTokens, req, &reply))
	must.Len(t, 1, reply.Tokens)
	return reply.Tokens[0].SecretID
}

// What Nomad's coarse namespace policies imply, written out by hand (not
// taken from nomad/acl) so the test checks the implementation against the
// documented language.
var (
	readImplies = []string{"list-jobs", "parse-job", "read-job", "csi-list-volume", "csi-read-volume",
		"read-job-scaling", "list-scaling-policies", "read-scaling-policy", "host-volume-read"}
	writeImplies = append(slices.Clone(readImplies), "submit-job", "dispatch-job", "read-logs", "read-fs",
		"alloc-exec", "alloc-lifecycle", "csi-write-volume", "csi-mount-volume", "scale-job",
		"submit-recommendation", "host-volume-create", "host-volume-delete")
)

type caller int

const (
	noToken   caller = iota // ACLs on, no anonymous policy
	anonymous               // no token, anonymous policy = read
	bogus                   // a secret that is nobody's
	readTok
	writeTok
	mgmtTok
)

var callerNames = []string{"no token", "anonymous", "bogus token", "read token", "write token", "management"}

// expect is the specification each endpoint's rule must meet.
func expect(e auth.Endpoint, c caller) bool {
	r := e.Rule
	if r.Kind == auth.Public {
		return true
	}
	if c == bogus {
		return false
	}
	switch r.Kind {
	case auth.Namespace:
		switch c {
		case anonymous, readTok:
			return slices.Contains(readImplies, r.Cap)
		case writeTok:
			return slices.Contains(writeImplies, r.Cap)
		case mgmtTok:
			return true
		}
		return false
	case auth.NodeRead, auth.OperatorRead, auth.AgentRead, auth.PluginList, auth.PluginRead:
		return c == readTok || c == writeTok || c == mgmtTok
	case auth.NodeWrite, auth.OperatorWrite:
		return c == writeTok || c == mgmtTok
	case auth.Management:
		return c == mgmtTok
	case auth.NodeOnly:
		return false // none of these callers is a node
	case auth.AnyToken:
		return true // the endpoint narrows; see anyTokenRefusals
	}
	return false
}

// anyTokenRefusals: AnyToken endpoints let every valid caller in and then
// decide; with empty args these callers are refused by the endpoint.
var anyTokenRefusals = map[string][]caller{
	structs.MethodACLGetPolicy: {noToken, anonymous, readTok, writeTok},
	structs.MethodACLGetToken:  {noToken, anonymous, readTok, writeTok},
}

// TestACL_EveryEndpointEveryCaller walks every RPC method the server
// exposes and every HTTP-only row of the endpoint table, for each kind of
// caller, and checks allow/deny against the specification above. A method
// without a row fails here (and the server would not start).
func TestACL_EveryEndpointEveryCaller(t *testing.T) {
	s, mgmt := aclServer(t)
	everyEndpointEveryCaller(t, s, s, mgmt)
}

// The same through a follower. A follower leaves a refusal to the leader
// (its state may lag a node or token the leader already has), so this
// shows that no refused call runs on the follower instead: each one is
// refused by the leader it is forwarded to, and local endpoints still
// decide on the follower.
func TestACL_EveryEndpointEveryCallerThroughAFollower(t *testing.T) {
	servers := cluster.NewCluster(t, 3, func(_ int, c *nomad.Config) { c.ACLEnabled = true })
	leader := cluster.WaitForLeader(t, servers...)
	var reply structs.ACLTokenUpsertResponse
	must.NoError(t, leader.RPC(structs.MethodACLBootstrap, &structs.ACLTokenBootstrapRequest{}, &reply))
	everyEndpointEveryCaller(t, leader, followers(servers, leader)[0], reply.Tokens[0].SecretID)
}

// everyEndpointEveryCaller writes the policies and tokens through s and
// makes every call through via.
func everyEndpointEveryCaller(t *testing.T, s, via *cluster.Server, mgmt string) {
	applyPolicy(t, s, mgmt, "reader", `
namespace "default" { policy = "read" }
node { policy = "read" }
agent { policy = "read" }
operator { policy = "read" }
plugin { policy = "read" }
`)
	applyPolicy(t, s, mgmt, "writer", `
namespace "default" { policy = "write" }
node { policy = "write" }
agent { policy = "write" }
operator { policy = "write" }
plugin { policy = "read" }
`)
	secrets := map[caller]string{
		bogus: "6f0b1a52-0000-4000-8000-000000000000", mgmtTok: mgmt,
		readTok: createToken(t, s, mgmt, "r", "reader"), writeTok: createToken(t, s, mgmt, "w", "writer"),
	}
	types := s.RPCArgTypesForTest()
	caughtUp(t, s, via) // local endpoints answer from via's own state
	for method := range types {
		must.NotNil(t, auth.Lookup(method), must.Sprintf("RPC method %s has no row in the endpoint table", method))
	}

	call := func(e auth.Endpoint, secret string) error {
		if e.HTTPOnly {
			args := &structs.ACLAuthorizeRequest{Endpoint: e.Method}
			args.AuthToken = secret
			return via.RPC(structs.MethodACLAuthorize, args, &structs.ACLAuthorizeResponse{})
		}
		ts, ok := types[e.Method]
		must.True(t, ok, must.Sprintf("table row %s is no RPC method and not marked HTTPOnly", e.Method))
		args := reflect.New(ts[0].Elem()).Interface()
		if ar, ok := args.(structs.AuthRequest); ok {
			ar.SetAuthToken(secret)
		}
		return via.RPC(e.Method, args, reflect.New(ts[1].Elem()).Interface())
	}

	run := func(callers ...caller) {
		for _, e := range auth.Endpoints() {
			if e.Method == structs.MethodACLBootstrap || e.Method == structs.MethodOperatorRaftRemovePeer || e.Method == structs.MethodOperatorRaftAddPeer {
				// Bootstrap is once-only and peer changes need real
				// peers: both are covered by their own tests; here
				// only their refusals are checked.
				for _, c := range callers {
					if !expect(e, c) {
						err := call(e, secrets[c])
						must.Eq(t, structs.CodePermissionDenied, structs.CodeOf(err), must.Sprintf("%s by %s", e.Method, callerNames[c]))
					}
				}
				continue
			}
			for _, c := range callers {
				want := expect(e, c) && !slices.Contains(anyTokenRefusals[e.Method], c)
				err := call(e, secrets[c])
				denied := structs.CodeOf(err) == structs.CodePermissionDenied
				must.Eq(t, !want, denied, must.Sprintf("%s (%s rule) by %s: err=%v", e.Method, e.Rule.Kind, callerNames[c], err))
			}
		}
	}
	run(noToken, bogus, readTok, writeTok, mgmtTok)

	// The anonymous policy is what a request without a token gets.
	applyPolicy(t, s, mgmt, structs.AnonymousPolicyName, `namespace "default" { policy = "read" }`)
	caughtUp(t, s, via)
	run(anonymous)
}

// caughtUp waits until via's state has every write s has applied.
func caughtUp(t *testing.T, s, via *cluster.Server) {
	t.Helper()
	want, err := s.State().LatestIndex()
	must.NoError(t, err)
	testutil.WaitForResult(t, func() (bool, error) {
		got, err := via.State().LatestIndex()
		if err != nil || got < want {
			return false, fmt.Errorf("%s at index %d, want %d (%v)", via.Config.NodeName, got, want, err)
		}
		return true, nil
	})
}

// A 403 names the capability and the namespace.
func TestACL_DeniedNamesTheCapability(t *testing.T) {
	s, mgmt := aclServer(t)
	applyPolicy(t, s, mgmt, "csi-reader", `namespace "default" { capabilities = ["csi-read-volume", "csi-list-volume"] }`)
	tok := createToken(t, s, mgmt, "csi", "csi-reader")

	reg := &structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{{ID: "v1", Namespace: "default", PluginID: "p"}}}
	reg.AuthToken = tok
	err := s.RPC(structs.MethodCSIVolumeRegister, reg, &structs.CSIVolumeRegisterResponse{})
	must.Eq(t, structs.CodePermissionDenied, structs.CodeOf(err))
	must.StrContains(t, err.Error(), "token lacks csi-write-volume in namespace default")

	list := &structs.CSIVolumeListRequest{}
	list.AuthToken = tok
	must.NoError(t, s.RPC(structs.MethodCSIVolumeList, list, &structs.CSIVolumeListResponse{}))
}

// CVE-2024-10975: rights in one namespace must not write objects into
// another by naming it inside the object.
func TestACL_ObjectNamespaceIsChecked(t *testing.T) {
	s, mgmt := aclServer(t)
	applyPolicy(t, s, mgmt, "team", `namespace "team" { policy = "write" }`)
	tok := createToken(t, s, mgmt, "team", "team")

	reg := &structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{{ID: "v1", Namespace: "prod", PluginID: "p"}}}
	reg.Namespace = "team"
	reg.AuthToken = tok
	err := s.RPC(structs.MethodCSIVolumeRegister, reg, &structs.CSIVolumeRegisterResponse{})
	must.Eq(t, structs.CodePermissionDenied, structs.CodeOf(err))
	must.StrContains(t, err.Error(), "csi-write-volume in namespace prod")

	job := &structs.JobRegisterRequest{Job: &structs.Job{ID: "j", Namespace: "prod"}}
	job.Namespace = "team"
	job.AuthToken = tok
	err = s.RPC(structs.MethodJobRegister, job, &structs.JobRegisterResponse{})
	must.Eq(t, structs.CodePermissionDenied, structs.CodeOf(err))
	must.StrContains(t, err.Error(), "submit-job in namespace prod")
}

// wantRules is the reviewed rule of every endpoint, written out so that a
// changed rule (a read that starts needing less, a write that no longer
// needs the capability) shows up as a diff here, not silently.
var wantRules = map[string]string{
	"Status.Ping": "public", "Status.Leader": "public", "Status.Peers": "public",
	"Operator.RaftGetConfiguration": "operator:read", "Operator.RaftAddPeer": "operator:write",
	"Operator.RaftRemovePeer": "operator:write",
	"Node.Register":           "public", "Node.UpdateStatus": "node secret", "Node.GetClientAllocs": "node secret",
	"Node.UpdateAlloc": "node secret", "Node.GetNode": "node:read+node", "Node.List": "node:read",
	"Node.GetAllocs": "node:read", "Node.UpdateDrain": "node:write", "Node.UpdateEligibility": "node:write",
	"Job.Register": "namespace:submit-job+extra", "Job.Deregister": "namespace:submit-job",
	"Job.Plan": "namespace:submit-job+extra", "Job.GetJob": "namespace:read-job", "Job.List": "namespace:list-jobs",
	"Job.Allocations": "namespace:read-job", "Job.Evaluations": "namespace:read-job",
	"Job.GetJobVersions": "namespace:read-job", "Job.Revert": "namespace:submit-job",
	"Job.Stable":     "namespace:submit-job",
	"Alloc.GetAlloc": "namespace:read-job+node", "Alloc.List": "namespace:read-job",
	"Eval.GetEval": "namespace:read-job", "Eval.List": "namespace:read-job",
	"CSIVolume.Register": "namespace:csi-write-volume", "CSIVolume.Deregister": "namespace:csi-write-volume",
	"CSIVolume.Create":         "namespace:csi-write-volume",
	"CSIVolume.CreateSnapshot": "namespace:csi-write-volume",
	"CSIVolume.DeleteSnapshot": "namespace:csi-write-volume",
	"CSIVolume.ListSnapshots":  "namespace:csi-list-volume", "CSIVolume.Delete": "namespace:csi-write-volume",
	"CSIVolume.Detach": "namespace:csi-write-volume+extra", "CSIVolume.Get": "namespace:csi-read-volume+node",
	"CSIVolume.List": "namespace:csi-list-volume", "CSIVolume.Claim": "node secret",
	"CSIVolume.Unpublish": "node secret", "CSIVolume.ReportProgress": "node secret", "CSIVolume.ReportStats": "node secret",
	"CSIPlugin.Get": "plugin:read", "CSIPlugin.List": "plugin:list",
	"System.GarbageCollect": "management",
	"ACL.Bootstrap":         "public", "ACL.UpsertPolicies": "management", "ACL.DeletePolicies": "management",
	"ACL.UpsertTokens": "management", "ACL.DeleteTokens": "management", "ACL.ListTokens": "management",
	"ACL.GetPolicy": "any token", "ACL.ListPolicies": "any token", "ACL.GetToken": "any token",
	"ACL.ResolveToken": "any token", "ACL.Authorize": "public",
	"HTTP.AgentHealth": "public", "HTTP.Metrics": "public", "HTTP.AgentSelf": "agent:read",
	"HTTP.ClientFSLogs": "namespace:read-logs", "HTTP.AuditLog": "management",
	"HTTP.EventStream": "namespace:read-job", "HTTP.EventStreamNode": "node:read",
	"HTTP.EventStreamVolume": "namespace:csi-read-volume", "HTTP.EventStreamPlugin": "plugin:read",
	"HTTP.EventStreamAllNamespaces": "management",
	"HTTP.JobsParse":                "namespace:parse-job", "HTTP.ClientStats": "node:read",
	"HTTP.ClientAllocStats": "namespace:read-job",
	"HTTP.ClientAllocExec":  "namespace:alloc-exec", "HTTP.ClientAllocNodeExec": "namespace:alloc-node-exec",
	"HTTP.AgentMonitor": "agent:read", "HTTP.ClientFS": "namespace:read-fs",
	"Alloc.Stop": "namespace:alloc-lifecycle", "Alloc.Restart": "namespace:alloc-lifecycle",
	"Alloc.Signal": "namespace:alloc-lifecycle", "Alloc.FS": "namespace:read-fs",
}

func TestACL_TableMatchesReviewedRules(t *testing.T) {
	got := map[string]string{}
	for _, e := range auth.Endpoints() {
		r := e.Rule.Kind.String()
		if e.Rule.Cap != "" {
			r += ":" + e.Rule.Cap
		}
		if e.Rule.AllowNode {
			r += "+node"
		}
		if e.Rule.Extra != nil {
			r += "+extra"
		}
		got[e.Method] = r
	}
	must.Eq(t, wantRules, got)
}

// A list across namespace=* shows only the namespaces the token may list.
func TestACL_ListAcrossNamespacesIsFiltered(t *testing.T) {
	s, mgmt := aclServer(t)
	for _, ns := range []string{"default", "team"} {
		job := testJob("j-" + ns)
		job.Namespace = ns
		req := &structs.JobRegisterRequest{Job: job}
		req.Namespace = ns
		req.AuthToken = mgmt
		must.NoError(t, s.RPC(structs.MethodJobRegister, req, &structs.JobRegisterResponse{}))
	}
	applyPolicy(t, s, mgmt, "team", `namespace "team" { policy = "read" }`)
	tok := createToken(t, s, mgmt, "team", "team")

	list := func(secret string) []string {
		req := &structs.GenericRequest{}
		req.Namespace = structs.AllNamespaces
		req.AuthToken = secret
		var reply structs.JobListResponse
		must.NoError(t, s.RPC(structs.MethodJobList, req, &reply))
		var ids []string
		for _, j := range reply.Jobs {
			ids = append(ids, j.ID)
		}
		slices.Sort(ids)
		return ids
	}
	must.Eq(t, []string{"j-team"}, list(tok))
	must.Eq(t, []string{"j-default", "j-team"}, list(mgmt))

	// Asking for a namespace the token cannot read is a 403, not an
	// empty list.
	req := &structs.GenericRequest{}
	req.Namespace = "default"
	req.AuthToken = tok
	err := s.RPC(structs.MethodJobList, req, &structs.JobListResponse{})
	must.StrContains(t, err.Error(), "token lacks list-jobs in namespace default")
}

func TestACL_BootstrapOnceAndSecretsNeverStored(t *testing.T) {
	s, mgmt := aclServer(t)
	var reply structs.ACLTokenUpsertResponse
	err := s.RPC(structs.MethodACLBootstrap, &structs.ACLTokenBootstrapRequest{}, &reply)
	must.Eq(t, structs.CodeConflict, structs.CodeOf(err), must.Sprint("a second bootstrap must fail"))

	applyPolicy(t, s, mgmt, "p", `namespace "default" { policy = "read" }`)
	secret := createToken(t, s, mgmt, "client", "p")
	iter, err := s.State().ACLTokens(nil, "")
	must.NoError(t, err)
	n := 0
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		tok := raw.(*structs.ACLToken)
		must.Eq(t, "", tok.SecretID, must.Sprint("the state store keeps no secret"))
		must.NotEq(t, "", tok.SecretHash)
		must.NotEq(t, secret, tok.SecretHash)
		must.NotEq(t, mgmt, tok.SecretHash)
		n++
	}
	must.Eq(t, 2, n)

	// Reads never return a secret; token/self echoes the caller's own.
	self := &structs.GenericRequest{}
	self.AuthToken = secret
	var sr structs.SingleACLTokenResponse
	must.NoError(t, s.RPC(structs.MethodACLResolveToken, self, &sr))
	must.Eq(t, secret, sr.Token.SecretID)
	get := &structs.ACLTokenSpecificRequest{AccessorID: sr.Token.AccessorID}
	get.AuthToken = mgmt
	var gr structs.SingleACLTokenResponse
	must.NoError(t, s.RPC(structs.MethodACLGetToken, get, &gr))
	must.Eq(t, "", gr.Token.SecretID)
	must.Eq(t, "", gr.Token.SecretHash)

	// A deleted token stops working.
	del := &structs.ACLTokenDeleteRequest{AccessorIDs: []string{sr.Token.AccessorID}}
	del.AuthToken = mgmt
	must.NoError(t, s.RPC(structs.MethodACLDeleteTokens, del, &structs.GenericResponse{}))
	err = s.RPC(structs.MethodACLResolveToken, self, &sr)
	must.Eq(t, structs.CodePermissionDenied, structs.CodeOf(err))
}

func TestACL_PolicyErrorsAndUnknownPolicies(t *testing.T) {
	s, mgmt := aclServer(t)
	req := &structs.ACLPolicyUpsertRequest{Policies: []*structs.ACLPolicy{{Name: "bad", Rules: "namespace \"default\" {\n  capabilities = [\"csi-frob-volume\"]\n}\n"}}}
	req.AuthToken = mgmt
	err := s.RPC(structs.MethodACLUpsertPolicies, req, &structs.GenericResponse{})
	must.Eq(t, structs.CodeInvalid, structs.CodeOf(err))
	must.StrContains(t, err.Error(), `bad:2:19: unknown capability "csi-frob-volume"`)

	tr := &structs.ACLTokenUpsertRequest{Tokens: []*structs.ACLToken{{Name: "x", Type: structs.ACLClientToken, Policies: []string{"nope"}}}}
	tr.AuthToken = mgmt
	err = s.RPC(structs.MethodACLUpsertTokens, tr, &structs.ACLTokenUpsertResponse{})
	must.Eq(t, structs.CodeInvalid, structs.CodeOf(err))
	must.StrContains(t, err.Error(), `names policy "nope", which does not exist`)
}

// ACLs and tokens survive a snapshot and restore (and the bootstrap
// stays done).
func TestACL_SnapshotRestore(t *testing.T) {
	s, mgmt := aclServer(t)
	applyPolicy(t, s, mgmt, "p", `namespace "default" { policy = "read" }`)
	secret := createToken(t, s, mgmt, "client", "p")

	fsm := s.FSMForTest()
	snap, err := fsm.Snapshot()
	must.NoError(t, err)
	sink := &memSink{}
	must.NoError(t, snap.Persist(sink))
	fresh, err := nomad.NewFSM(nil)
	must.NoError(t, err)
	must.NoError(t, fresh.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))))

	st := fresh.State()
	tok, err := st.ACLTokenBySecret(nil, secret)
	must.NoError(t, err)
	must.NotNil(t, tok)
	must.Eq(t, []string{"p"}, tok.Policies)
	p, err := st.ACLPolicyByName(nil, "p")
	must.NoError(t, err)
	must.NotNil(t, p)
	idx, err := st.ACLBootstrapped()
	must.NoError(t, err)
	must.Positive(t, idx)
}

type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "mem" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }

// Adding a Raft peer that nothing answers at is refused before Raft sees
// it (a voter at a bogus address can leave the cluster leaderless).
func TestOperator_AddPeerChecksTheAddressAnswers(t *testing.T) {
	s, mgmt := aclServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	dead := ln.Addr().String()
	ln.Close()

	req := &structs.RaftPeerRequest{Address: dead, ID: "ghost"}
	req.AuthToken = mgmt
	err = s.RPC(structs.MethodOperatorRaftAddPeer, req, &structs.GenericResponse{})
	must.Eq(t, structs.CodeInvalid, structs.CodeOf(err))
	must.StrContains(t, err.Error(), "no Berth server answers at "+dead)

	// A live server that is not who the request says it is.
	other := cluster.NewServer(t, nil)
	req = &structs.RaftPeerRequest{Address: other.Addr, ID: "someone-else"}
	req.AuthToken = mgmt
	err = s.RPC(structs.MethodOperatorRaftAddPeer, req, &structs.GenericResponse{})
	must.StrContains(t, err.Error(), "has ID "+other.ID())

	f := s.Raft().GetConfiguration()
	must.NoError(t, f.Error())
	must.Len(t, 1, f.Configuration().Servers)

	// Without operator write, no request gets that far.
	req.AuthToken = ""
	err = s.RPC(structs.MethodOperatorRaftAddPeer, req, &structs.GenericResponse{})
	must.Eq(t, structs.CodePermissionDenied, structs.CodeOf(err))
	must.StrContains(t, err.Error(), "token lacks operator write")
}

// A server that serves a call itself authorizes again a refusal a
// follower deferred to the leader: the follower may have become the
// leader between deferring and forwarding.
func TestACL_DeferredRefusalIsDecidedWhereTheCallIsServed(t *testing.T) {
	s, mgmt := aclServer(t)
	deferred := func(secret string) *structs.CSIVolumeListRequest {
		args := &structs.CSIVolumeListRequest{}
		args.AuthToken = secret
		args.DeferAuth(structs.NewError(structs.CodePermissionDenied, "Permission denied: as a follower saw it"))
		return args
	}
	done, err := s.ForwardForTest(structs.MethodCSIVolumeList, deferred("6f0b1a52-0000-4000-8000-000000000000"), &structs.CSIVolumeListResponse{})
	must.True(t, done, must.Sprint("a refused call must not reach the endpoint"))
	must.Eq(t, structs.CodePermissionDenied, structs.CodeOf(err))

	done, err = s.ForwardForTest(structs.MethodCSIVolumeList, deferred(mgmt), &structs.CSIVolumeListResponse{})
	must.NoError(t, err, must.Sprint("the leader's state knows the token"))
	must.False(t, done)
}
