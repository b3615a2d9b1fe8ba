package nomad

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/rpc"
	"reflect"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/acl"
	"github.com/berth-io/berth/nomad/audit"
	"github.com/berth-io/berth/nomad/auth"
	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// This file is the server's side of access control: the codec that
// authorizes every RPC through nomad/auth's endpoint table before net/rpc
// dispatches it, the ACL.* endpoints, and the FSM's ACL entries.

// authCodec authorizes each request once it is decoded. net/rpc reads
// requests one at a time on a connection (header, then body), so the
// method from the header is still current when the body arrives. A
// refusal becomes the call's error and the endpoint never runs.
//
// Writes that pass are remembered by sequence number and written to the
// audit log with their result when the response goes out.
type authCodec struct {
	rpc.ServerCodec
	srv    *Server
	method string
	seq    uint64

	// lock guards pending: responses are written from the goroutines
	// net/rpc runs calls in.
	lock    sync.Mutex
	pending map[uint64]audit.Entry
}

func newAuthCodec(s *Server, c rpc.ServerCodec) *authCodec {
	return &authCodec{ServerCodec: c, srv: s, pending: map[uint64]audit.Entry{}}
}

func (c *authCodec) ReadRequestHeader(r *rpc.Request) error {
	err := c.ServerCodec.ReadRequestHeader(r)
	c.method, c.seq = r.ServiceMethod, r.Seq
	return err
}

func (c *authCodec) ReadRequestBody(body any) error {
	if err := c.ServerCodec.ReadRequestBody(body); err != nil || body == nil {
		return err
	}
	e, id, err := c.srv.authorizeArriving(c.method, body)
	if err != nil {
		return structs.WireError(err)
	}
	// The server that applies a write records it; a follower that only
	// forwards it does not, so each write is in one server's log.
	if e.Audit && c.srv.audit.log != nil && (!e.Forward || c.srv.IsLeader()) {
		c.lock.Lock()
		c.pending[c.seq] = audit.Entry{Accessor: id.AccessorID(), Endpoint: c.method, Object: auth.Describe(body)}
		c.lock.Unlock()
	}
	return nil
}

func (c *authCodec) WriteResponse(r *rpc.Response, body any) error {
	c.lock.Lock()
	entry, ok := c.pending[r.Seq]
	delete(c.pending, r.Seq)
	c.lock.Unlock()
	if ok {
		entry.Result = "ok"
		if r.Error != "" {
			entry.Result = "error"
			entry.Error = structs.DecodeWireError(errors.New(r.Error)).Error()
		} else if wi, ok := body.(interface{ WriteIndex() uint64 }); ok {
			entry.Index = wi.WriteIndex()
		}
		c.srv.audit.record(entry)
	}
	return c.ServerCodec.WriteResponse(r, body)
}

// authorize applies method's row of the endpoint table to the request.
// A method with no row is refused: a new endpoint cannot ship open.
func (s *Server) authorize(method string, args any) (*auth.Endpoint, *auth.Identity, error) {
	e := auth.Lookup(method)
	if e == nil || e.HTTPOnly {
		return nil, nil, structs.NewError(structs.CodePermissionDenied, "Permission denied: %s has no authorization rule", method)
	}
	id, err := s.check(e, args)
	if err != nil {
		return nil, nil, err
	}
	return e, id, nil
}

// authorizeArriving is authorize for a request as it arrives on a
// connection. A follower that would refuse a request it is about to
// forward leaves the refusal to the leader (structs.AuthDeferrer): its
// state may not yet hold the node or token that a write it forwarded a
// moment ago created, and the leader checks every call it receives
// anyway. The refusal rides on the request, and forward answers it
// (after authorizing again) if this server ends up serving the request
// itself.
func (s *Server) authorizeArriving(method string, args any) (*auth.Endpoint, *auth.Identity, error) {
	e := auth.Lookup(method)
	d, ok := args.(structs.AuthDeferrer)
	if e == nil || e.HTTPOnly || !ok || !s.forwardsToLeader(e, args) {
		return s.authorize(method, args)
	}
	id, err := s.decide(e, args)
	if err != nil {
		d.DeferAuth(err)
		return e, &auth.Identity{}, nil
	}
	return e, id, nil
}

// forwardsToLeader reports whether forward will send args to the leader
// rather than serve it here: this server is not the leader, and the
// request is neither a stale read nor already forwarded.
func (s *Server) forwardsToLeader(e *auth.Endpoint, args any) bool {
	info, ok := args.(structs.RPCInfo)
	if !ok || !e.Forward || s.IsLeader() {
		return false
	}
	return !info.IsForwarded() && !(info.IsRead() && info.AllowStaleRead())
}

// authorizeDeferred authorizes, on the server that serves it, a request
// whose refusal a follower deferred (see authorizeArriving).
func (s *Server) authorizeDeferred(method string, args any) error {
	d, ok := args.(structs.AuthDeferrer)
	if !ok || d.DeferredAuth() == nil {
		return nil
	}
	e := auth.Lookup(method)
	if e == nil {
		return d.DeferredAuth()
	}
	_, err := s.check(e, args)
	return err
}

// check resolves the caller and applies e's rule; a refusal is logged
// (and audited for writes).
func (s *Server) check(e *auth.Endpoint, args any) (*auth.Identity, error) {
	id, err := s.decide(e, args)
	if err != nil {
		s.audit.denied(e.Method, id, args, err)
		return nil, err
	}
	return id, nil
}

// decide resolves the caller and applies e's rule.
func (s *Server) decide(e *auth.Endpoint, args any) (*auth.Identity, error) {
	id, err := s.identity(args)
	if err != nil && e.Rule.Kind == auth.Public {
		// Public endpoints answer whatever the token; an unknown one
		// is only unnamed in the audit log.
		id, err = &auth.Identity{}, nil
	}
	if err == nil {
		err = auth.Authorize(e, id, args)
	}
	return id, err
}

// identity resolves the secret a request carries.
func (s *Server) identity(args any) (*auth.Identity, error) {
	var secret string
	if ar, ok := args.(structs.AuthRequest); ok {
		secret = ar.GetAuthToken()
	}
	return s.resolver.Resolve(s.fsm.State(), secret, time.Now())
}

// ACLEnabled reports whether the server enforces ACLs.
func (s *Server) ACLEnabled() bool { return s.resolver.Enabled }

// checkRPCTable makes sure every method the RPC server exposes has a row
// in the endpoint table, so a new endpoint fails at startup, not in use.
func checkRPCTable(endpoints map[string]any) error {
	for name, ep := range endpoints {
		for _, m := range exportedRPCMethods(ep) {
			if auth.Lookup(name+"."+m) == nil {
				return fmt.Errorf("server: rpc method %s.%s has no row in the endpoint table (nomad/auth)", name, m)
			}
		}
	}
	return nil
}

// ACL serves tokens and policies ("ACL.*").
type ACL struct {
	srv *Server
}

// Bootstrap creates the first management token. It succeeds once per
// cluster; the state store refuses a second in the same transaction.
func (a *ACL) Bootstrap(args *structs.ACLTokenBootstrapRequest, reply *structs.ACLTokenUpsertResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodACLBootstrap, time.Now())
	if !a.srv.ACLEnabled() {
		return structs.NewError(structs.CodeInvalid, "ACL support is disabled: set acl { enabled = true } in the agent config of every server")
	}
	if done, err := a.srv.forward(structs.MethodACLBootstrap, args, args, reply); done {
		return err
	}
	secret := args.BootstrapSecret
	if secret == "" {
		secret = helper.UUID()
	} else if len(secret) < 16 {
		return structs.NewError(structs.CodeInvalid, "bootstrap secret is too short: use a random UUID")
	}
	tok := &structs.ACLToken{
		AccessorID: helper.UUID(), SecretHash: structs.HashSecret(secret),
		Name: "Bootstrap Token", Type: structs.ACLManagementToken, Global: true,
		CreateTime: time.Now().UTC().Truncate(time.Second),
	}
	req := &structs.ACLTokenBootstrapRequest{Token: tok, WriteRequest: args.WriteRequest}
	_, index, err := a.srv.raftApply(structs.ACLTokenBootstrapRequestType, req)
	if err != nil {
		return err
	}
	out := tok.Copy()
	out.SecretID, out.SecretHash = secret, ""
	out.CreateIndex, out.ModifyIndex = index, index
	reply.Tokens, reply.Index = []*structs.ACLToken{out}, index
	return nil
}

// UpsertPolicies writes policies after parsing their rules: a policy that
// does not parse never reaches Raft.
func (a *ACL) UpsertPolicies(args *structs.ACLPolicyUpsertRequest, reply *structs.GenericResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodACLUpsertPolicies, time.Now())
	if done, err := a.srv.forward(structs.MethodACLUpsertPolicies, args, args, reply); done {
		return err
	}
	if len(args.Policies) == 0 {
		return structs.NewError(structs.CodeInvalid, "acl policy apply: no policies given")
	}
	for _, p := range args.Policies {
		if err := p.Validate(); err != nil {
			return err
		}
		if _, err := acl.Parse(p.Name, []byte(p.Rules)); err != nil {
			return structs.NewError(structs.CodeInvalid, "acl policy %q: %v", p.Name, err)
		}
	}
	_, index, err := a.srv.raftApply(structs.ACLPolicyUpsertRequestType, args)
	reply.Index = index
	return err
}

// DeletePolicies deletes policies by name.
func (a *ACL) DeletePolicies(args *structs.ACLPolicyDeleteRequest, reply *structs.GenericResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodACLDeletePolicies, time.Now())
	if done, err := a.srv.forward(structs.MethodACLDeletePolicies, args, args, reply); done {
		return err
	}
	if len(args.Names) == 0 {
		return structs.NewError(structs.CodeInvalid, "acl policy delete: no policy names given")
	}
	_, index, err := a.srv.raftApply(structs.ACLPolicyDeleteRequestType, args)
	reply.Index = index
	return err
}

// GetPolicy reads one policy. A client token may read the policies it
// holds; anything else needs a management token.
func (a *ACL) GetPolicy(args *structs.ACLPolicySpecificRequest, reply *structs.SingleACLPolicyResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodACLGetPolicy, time.Now())
	if done, err := a.srv.forward(structs.MethodACLGetPolicy, args, args, reply); done {
		return err
	}
	id, err := a.srv.identity(args)
	if err != nil {
		return err
	}
	if !id.ACL.IsManagement() && !holdsPolicy(id, args.Name) {
		return structs.PermissionDenied(fmt.Sprintf("management rights (or the policy %q)", args.Name))
	}
	return a.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		p, err := snap.ACLPolicyByName(ws, args.Name)
		if err != nil {
			return 0, err
		}
		if p == nil {
			return 0, structs.NotFound("ACL policy", args.Name)
		}
		cp := *p
		reply.Policy = &cp
		return p.ModifyIndex, nil
	})
}

func holdsPolicy(id *auth.Identity, name string) bool {
	if id.Anonymous {
		return name == structs.AnonymousPolicyName
	}
	if id.Token == nil {
		return false
	}
	for _, p := range id.Token.Policies {
		if p == name {
			return true
		}
	}
	return false
}

// ListPolicies lists policies: all of them for a management token, the
// token's own otherwise.
func (a *ACL) ListPolicies(args *structs.GenericRequest, reply *structs.ACLPolicyListResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodACLListPolicies, time.Now())
	if done, err := a.srv.forward(structs.MethodACLListPolicies, args, args, reply); done {
		return err
	}
	id, err := a.srv.identity(args)
	if err != nil {
		return err
	}
	return a.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		iter, err := snap.ACLPolicies(ws, args.Prefix)
		if err != nil {
			return 0, err
		}
		reply.Policies = []*structs.ACLPolicyListStub{}
		for raw := iter.Next(); raw != nil; raw = iter.Next() {
			p := raw.(*structs.ACLPolicy)
			if id.ACL.IsManagement() || holdsPolicy(id, p.Name) {
				reply.Policies = append(reply.Policies, p.Stub())
			}
		}
		return snap.Index(state.TableACLPolicies)
	})
}

// UpsertTokens creates tokens (no AccessorID) or updates them (name,
// policies; never the secret or type of an existing token).
func (a *ACL) UpsertTokens(args *structs.ACLTokenUpsertRequest, reply *structs.ACLTokenUpsertResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodACLUpsertTokens, time.Now())
	if done, err := a.srv.forward(structs.MethodACLUpsertTokens, args, args, reply); done {
		return err
	}
	if len(args.Tokens) == 0 {
		return structs.NewError(structs.CodeInvalid, "acl token create: no tokens given")
	}
	snap, err := a.srv.fsm.State().Snapshot()
	if err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	secrets := map[string]string{}
	var out []*structs.ACLToken
	for _, in := range args.Tokens {
		t := in.Copy()
		t.SecretHash = ""
		if err := t.Validate(); err != nil {
			return err
		}
		for _, name := range t.Policies {
			p, err := snap.ACLPolicyByName(nil, name)
			if err != nil {
				return err
			}
			if p == nil {
				return structs.NewError(structs.CodeInvalid, "token %q names policy %q, which does not exist: apply it first with `berth acl policy apply`", t.Name, name)
			}
		}
		if t.AccessorID == "" {
			secret := helper.UUID()
			t.AccessorID = helper.UUID()
			t.SecretHash = structs.HashSecret(secret)
			t.CreateTime = now
			if t.ExpirationTTL > 0 {
				exp := now.Add(t.ExpirationTTL)
				t.ExpirationTime = &exp
			}
			secrets[t.AccessorID] = secret
		} else {
			old, err := snap.ACLTokenByAccessorID(nil, t.AccessorID)
			if err != nil {
				return err
			}
			if old == nil {
				return structs.NotFound("ACL token", t.AccessorID)
			}
			if old.Type != t.Type {
				return structs.NewError(structs.CodeInvalid, "token %s: cannot change type from %s to %s; create a new token", t.AccessorID, old.Type, t.Type)
			}
			t.SecretHash = old.SecretHash
		}
		t.SecretID = ""
		out = append(out, t)
	}
	req := &structs.ACLTokenUpsertRequest{Tokens: out, WriteRequest: args.WriteRequest}
	_, index, err := a.srv.raftApply(structs.ACLTokenUpsertRequestType, req)
	if err != nil {
		return err
	}
	after := a.srv.fsm.State()
	for _, t := range out {
		stored, err := after.ACLTokenByAccessorID(nil, t.AccessorID)
		if err != nil || stored == nil {
			return fmt.Errorf("reading token %s back: %w", t.AccessorID, errors.Join(err, errors.New("missing")))
		}
		r := stored.Sanitized()
		r.SecretID = secrets[t.AccessorID]
		reply.Tokens = append(reply.Tokens, r)
	}
	reply.Index = index
	return nil
}

// DeleteTokens deletes tokens by accessor.
func (a *ACL) DeleteTokens(args *structs.ACLTokenDeleteRequest, reply *structs.GenericResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodACLDeleteTokens, time.Now())
	if done, err := a.srv.forward(structs.MethodACLDeleteTokens, args, args, reply); done {
		return err
	}
	if len(args.AccessorIDs) == 0 {
		return structs.NewError(structs.CodeInvalid, "acl token delete: no accessor IDs given")
	}
	_, index, err := a.srv.raftApply(structs.ACLTokenDeleteRequestType, args)
	reply.Index = index
	return err
}

// GetToken reads a token by accessor: a management token may read any,
// a client token only itself. The secret is never returned.
func (a *ACL) GetToken(args *structs.ACLTokenSpecificRequest, reply *structs.SingleACLTokenResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodACLGetToken, time.Now())
	if done, err := a.srv.forward(structs.MethodACLGetToken, args, args, reply); done {
		return err
	}
	id, err := a.srv.identity(args)
	if err != nil {
		return err
	}
	if !id.ACL.IsManagement() && (id.Token == nil || id.Token.AccessorID != args.AccessorID) {
		return structs.PermissionDenied("management rights (a client token may read only itself)")
	}
	return a.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		t, err := snap.ACLTokenByAccessorID(ws, args.AccessorID)
		if err != nil {
			return 0, err
		}
		if t == nil {
			return 0, structs.NotFound("ACL token", args.AccessorID)
		}
		reply.Token = t.Sanitized()
		return t.ModifyIndex, nil
	})
}

// ResolveToken is token/self: the token whose secret the request
// carries, with that secret (the caller already holds it).
func (a *ACL) ResolveToken(args *structs.GenericRequest, reply *structs.SingleACLTokenResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodACLResolveToken, time.Now())
	id, err := a.srv.identity(args)
	if err != nil {
		return err
	}
	if id.Token == nil {
		return structs.NewError(structs.CodeNotFound, "ACL token not found: the request carries no token (set -token or BERTH_TOKEN)")
	}
	reply.Token = id.Token.Sanitized()
	reply.Token.SecretID = args.AuthToken
	reply.Index = id.Token.ModifyIndex
	return nil
}

// ListTokens lists tokens (management only).
func (a *ACL) ListTokens(args *structs.GenericRequest, reply *structs.ACLTokenListResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodACLListTokens, time.Now())
	if done, err := a.srv.forward(structs.MethodACLListTokens, args, args, reply); done {
		return err
	}
	return a.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		iter, err := snap.ACLTokens(ws, args.Prefix)
		if err != nil {
			return 0, err
		}
		reply.Tokens = []*structs.ACLTokenListStub{}
		for raw := iter.Next(); raw != nil; raw = iter.Next() {
			reply.Tokens = append(reply.Tokens, raw.(*structs.ACLToken).Stub())
		}
		return snap.Index(state.TableACLTokens)
	})
}

// Authorize applies an HTTP-only endpoint's rule (agent self, client
// logs, ...) for the agent serving it. Namespace is the object's.
func (a *ACL) Authorize(args *structs.ACLAuthorizeRequest, reply *structs.ACLAuthorizeResponse) (err error) {
	defer wire(&err)
	e := auth.Lookup(args.Endpoint)
	if e == nil || !e.HTTPOnly {
		return structs.NewError(structs.CodeInvalid, "ACL.Authorize: %q is not an HTTP endpoint of the table", args.Endpoint)
	}
	if args.AllocID != "" {
		alloc, err := a.srv.fsm.State().AllocByID(nil, args.AllocID)
		if err != nil {
			return err
		}
		if alloc == nil {
			return structs.NotFound("alloc", args.AllocID)
		}
		args.Namespace = alloc.Namespace
	}
	id, err := a.srv.check(e, args)
	if err != nil {
		return err
	}
	reply.AccessorID = id.AccessorID()
	return nil
}

// applyACL applies the ACL entries.
func (f *FSM) applyACL(t structs.MessageType, buf []byte, index uint64) error {
	switch t {
	case structs.ACLPolicyUpsertRequestType:
		var req structs.ACLPolicyUpsertRequest
		if err := decodeRequest(buf, &req); err != nil {
			return err
		}
		return f.State().UpsertACLPolicies(index, req.Policies)
	case structs.ACLPolicyDeleteRequestType:
		var req structs.ACLPolicyDeleteRequest
		if err := decodeRequest(buf, &req); err != nil {
			return err
		}
		return f.State().DeleteACLPolicies(index, req.Names)
	case structs.ACLTokenUpsertRequestType:
		var req structs.ACLTokenUpsertRequest
		if err := decodeRequest(buf, &req); err != nil {
			return err
		}
		return f.State().UpsertACLTokens(index, req.Tokens)
	case structs.ACLTokenDeleteRequestType:
		var req structs.ACLTokenDeleteRequest
		if err := decodeRequest(buf, &req); err != nil {
			return err
		}
		return f.State().DeleteACLTokens(index, req.AccessorIDs)
	case structs.ACLTokenBootstrapRequestType:
		var req structs.ACLTokenBootstrapRequest
		if err := decodeRequest(buf, &req); err != nil {
			return err
		}
		if req.Token == nil {
			return structs.NewError(structs.CodeInvalid, "acl bootstrap entry has no token")
		}
		return f.State().BootstrapACLToken(index, req.Token)
	}
	return fmt.Errorf("applyACL: message type %d is not an ACL entry", t)
}

// serverAudit feeds the audit log: successful and failed writes from the
// codec, refusals from authorize. The log is nil (records nothing) when
// the server has none configured.
type serverAudit struct {
	log    *audit.Log
	logger hclog.Logger
}

func (a *serverAudit) record(e audit.Entry) {
	if err := a.log.Record(e); err != nil {
		a.logger.Error("writing audit log", "error", err)
	}
}

// denied records a refusal: in the audit log for writes, and in the
// server log for everything.
func (a *serverAudit) denied(method string, id *auth.Identity, args any, err error) {
	a.logger.Info("request denied", "method", method, "accessor", id.AccessorID(), "reason", err.Error())
	if e := auth.Lookup(method); e != nil && !e.Write {
		return
	}
	a.record(audit.Entry{Accessor: id.AccessorID(), Endpoint: method, Object: auth.Describe(args), Result: "denied", Error: err.Error()})
}

// exportedRPCMethods lists the methods net/rpc registers on ep: exported,
// (args, *reply) error.
func exportedRPCMethods(ep any) []string {
	t := reflect.TypeOf(ep)
	errType := reflect.TypeOf((*error)(nil)).Elem()
	var out []string
	for i := 0; i < t.NumMethod(); i++ {
		m := t.Method(i)
		mt := m.Type
		if !m.IsExported() || mt.NumIn() != 3 || mt.NumOut() != 1 || mt.Out(0) != errType || mt.In(2).Kind() != reflect.Pointer {
			continue
		}
		out = append(out, m.Name)
	}
	return out
}

// nsPredicate says in which namespaces the caller holds capability; nil
// means everywhere (ACLs off, management, or a client node reading what
// its allocs need).
func (s *Server) nsPredicate(q *structs.QueryOptions, capability string) (func(ns string) bool, error) {
	id, err := s.identity(q)
	if err != nil {
		return nil, err
	}
	if id.ACL.IsManagement() || id.Node != nil {
		return nil, nil
	}
	return func(ns string) bool { return id.ACL.AllowNamespaceOperation(ns, capability) }, nil
}

// visible filters a list down to the namespaces where the caller holds
// capability: a list across namespace=* shows only what the token may see.
func visible[T any](s *Server, q *structs.QueryOptions, capability string, iter memdb.ResultIterator, nsOf func(T) string) (memdb.ResultIterator, error) {
	allow, err := s.nsPredicate(q, capability)
	if err != nil || allow == nil {
		return iter, err
	}
	return memdb.NewFilterIterator(iter, func(raw any) bool { return !allow(nsOf(raw.(T))) }), nil
}

// readableIn refuses an object found by ID in a namespace where the caller
// lacks capability (IDs are looked up across namespaces).
func (s *Server) readableIn(q *structs.QueryOptions, capability, ns string) error {
	allow, err := s.nsPredicate(q, capability)
	if err != nil || allow == nil || allow(ns) {
		return err
	}
	return structs.PermissionDenied(fmt.Sprintf("%s in namespace %s", capability, ns))
}

// checkReregister lets a node that is already known register again only
// with its own secret: anyone may register a new node, nobody may take
// over an existing one (or lock its client out by replacing the secret).
func (s *Server) checkReregister(n *structs.Node) error {
	prev, err := s.fsm.State().NodeByID(nil, n.ID)
	if err != nil || prev == nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(prev.SecretID), []byte(n.SecretID)) != 1 {
		return structs.NewError(structs.CodePermissionDenied,
			"Permission denied: node %s is registered with another secret; a node keeps its secret for life (remove the client's data_dir to join as a new node)", n.ID)
	}
	return nil
}

// AuditLog returns up to n of this server's newest audit entries (the
// log is per server: each records the writes it applied as leader).
func (s *Server) AuditLog(n int) ([]audit.Entry, error) {
	if s.audit.log == nil {
		return nil, structs.NewError(structs.CodeInvalid, "this server keeps no audit log: set acl { audit_log = \"/path\" } (servers with a data_dir keep one under it)")
	}
	return s.audit.log.Recent(n)
}
