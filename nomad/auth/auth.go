package auth

import (
	"crypto/subtle"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/acl"
	"github.com/berth-io/berth/nomad/structs"
)

// Identity is who sent a request.
type Identity struct {
	// ACL is what the caller may do. With ACLs disabled it is the
	// management ACL.
	ACL *acl.ACL
	// Token is the caller's ACL token; nil for anonymous and node callers.
	Token *structs.ACLToken
	// Node is set when the secret is a client node's.
	Node *structs.Node
	// Anonymous is set when the request carried no secret.
	Anonymous bool
	// ACLsOff is set when the server enforces no ACLs. Node-only
	// endpoints then also take callers without a node secret, as Nomad
	// does; a node that sends its secret is still held to its own node.
	ACLsOff bool
}

// AccessorID names the caller for the audit log.
func (id *Identity) AccessorID() string {
	switch {
	case id == nil:
		return ""
	case id.Token != nil:
		return id.Token.AccessorID
	case id.Node != nil:
		return "node:" + id.Node.ID
	case id.Anonymous:
		return "anonymous"
	}
	return "unknown-token"
}

// State is what resolving a secret reads.
type State interface {
	ACLTokenBySecret(ws memdb.WatchSet, secret string) (*structs.ACLToken, error)
	ACLPolicyByName(ws memdb.WatchSet, name string) (*structs.ACLPolicy, error)
	NodeBySecretID(ws memdb.WatchSet, secret string) (*structs.Node, error)
}

// Resolver turns secrets into identities. It caches parsed policies by
// name and modify index, so a request costs map lookups, not HCL parses.
type Resolver struct {
	// Enabled is the agent's acl.enabled.
	Enabled bool

	// lock guards policies.
	lock     sync.Mutex
	policies map[string]cachedPolicy
}

type cachedPolicy struct {
	modifyIndex uint64
	policy      *acl.Policy
}

// NewResolver returns a resolver; enabled says whether ACLs are on.
func NewResolver(enabled bool) *Resolver {
	return &Resolver{Enabled: enabled, policies: map[string]cachedPolicy{}}
}

// ErrTokenNotFound is a secret that is neither a token's nor a node's.
var ErrTokenNotFound = structs.NewError(structs.CodePermissionDenied, "Permission denied: ACL token not found")

// Resolve finds who holds secret. A secret that matches nothing is an
// error when ACLs are on; with them off every caller has the management
// ACL, but a node secret is still recognised so node checks work.
func (r *Resolver) Resolve(st State, secret string, now time.Time) (*Identity, error) {
	if secret == "" {
		if !r.Enabled {
			return &Identity{ACL: acl.Management(), Anonymous: true, ACLsOff: true}, nil
		}
		a, err := r.compile(st, []string{structs.AnonymousPolicyName})
		if err != nil {
			return nil, err
		}
		return &Identity{ACL: a, Anonymous: true}, nil
	}
	tok, err := st.ACLTokenBySecret(nil, secret)
	if err != nil {
		return nil, fmt.Errorf("resolving token: %w", err)
	}
	if tok != nil {
		if tok.IsExpired(now) {
			return nil, structs.NewError(structs.CodePermissionDenied, "Permission denied: ACL token %s expired", tok.AccessorID)
		}
		if !r.Enabled || tok.IsManagement() {
			return &Identity{ACL: acl.Management(), Token: tok, ACLsOff: !r.Enabled}, nil
		}
		a, err := r.compile(st, tok.Policies)
		if err != nil {
			return nil, err
		}
		return &Identity{ACL: a, Token: tok}, nil
	}
	node, err := st.NodeBySecretID(nil, secret)
	if err != nil {
		return nil, fmt.Errorf("resolving node secret: %w", err)
	}
	if node != nil && subtle.ConstantTimeCompare([]byte(node.SecretID), []byte(secret)) == 1 {
		id := &Identity{ACL: acl.Deny(), Node: node}
		if !r.Enabled {
			id.ACL, id.ACLsOff = acl.Management(), true
		}
		return id, nil
	}
	if !r.Enabled {
		return &Identity{ACL: acl.Management(), ACLsOff: true}, nil
	}
	return nil, ErrTokenNotFound
}

// compile merges the named policies; names with no policy are skipped (a
// token may outlive a policy it names).
func (r *Resolver) compile(st State, names []string) (*acl.ACL, error) {
	var ps []*acl.Policy
	for _, name := range names {
		p, err := st.ACLPolicyByName(nil, name)
		if err != nil {
			return nil, fmt.Errorf("reading acl policy %q: %w", name, err)
		}
		if p == nil {
			continue
		}
		parsed, err := r.parse(p)
		if err != nil {
			return nil, err
		}
		ps = append(ps, parsed)
	}
	return acl.New(ps...), nil
}

func (r *Resolver) parse(p *structs.ACLPolicy) (*acl.Policy, error) {
	r.lock.Lock()
	c, ok := r.policies[p.Name]
	r.lock.Unlock()
	if ok && c.modifyIndex == p.ModifyIndex {
		return c.policy, nil
	}
	parsed, err := acl.Parse(p.Name, []byte(p.Rules))
	if err != nil {
		// Policies are parsed before they are written, so this is a
		// policy written by a server that accepted more than this one.
		return nil, structs.NewError(structs.CodeInternal, "acl policy %q stored in raft does not parse: %v", p.Name, err)
	}
	r.lock.Lock()
	r.policies[p.Name] = cachedPolicy{modifyIndex: p.ModifyIndex, policy: parsed}
	r.lock.Unlock()
	return parsed, nil
}

// Check is one authorization in progress; Extra rules use it.
type Check struct {
	ID       *Identity
	Endpoint *Endpoint
}

// Namespace requires capability in ns.
func (c *Check) Namespace(ns, capability string) error {
	if ns == "" {
		ns = structs.DefaultNamespace
	}
	if ns == structs.AllNamespaces {
		// A list across namespaces: allowed if the token holds the
		// capability somewhere; the endpoint filters what it returns.
		if c.ID.ACL.AllowNamespaceInAny(capability) {
			return nil
		}
		return structs.PermissionDenied(capability + " in any namespace")
	}
	if c.ID.ACL.AllowNamespaceOperation(ns, capability) {
		return nil
	}
	return structs.PermissionDenied(fmt.Sprintf("%s in namespace %s", capability, ns))
}

// Authorize applies the endpoint's rule to a request from id. args is the
// decoded request (it may be nil for HTTP-only endpoints, where ns names
// the namespace).
func Authorize(e *Endpoint, id *Identity, args any) error {
	c := &Check{ID: id, Endpoint: e}
	if err := c.rule(args); err != nil {
		return err
	}
	if e.Rule.Extra != nil {
		return e.Rule.Extra(c, args)
	}
	return nil
}

func (c *Check) rule(args any) error {
	r, a := c.Endpoint.Rule, c.ID.ACL
	if r.AllowNode && c.ID.Node != nil {
		return c.nodeScope(args)
	}
	switch r.Kind {
	case Public, AnyToken:
		return nil
	case Namespace:
		ns := structs.DefaultNamespace
		if ar, ok := args.(structs.AuthRequest); ok {
			ns = ar.RequestNamespace()
		}
		if err := c.Namespace(ns, r.Cap); err != nil {
			return err
		}
		// The namespace of what the request writes, not only the
		// request's own (CVE-2024-10975: a volume in another namespace
		// written with rights in this one).
		for _, objNS := range objectNamespaces(args) {
			if objNS != ns {
				if err := c.Namespace(objNS, r.Cap); err != nil {
					return err
				}
			}
		}
		return nil
	case NodeRead:
		return allow(a.AllowNodeRead(), "node read")
	case NodeWrite:
		return allow(a.AllowNodeWrite(), "node write")
	case OperatorRead:
		return allow(a.AllowOperatorRead(), "operator read")
	case OperatorWrite:
		return allow(a.AllowOperatorWrite(), "operator write")
	case AgentRead:
		return allow(a.AllowAgentRead(), "agent read")
	case PluginList:
		return allow(a.AllowPluginList(), "plugin list")
	case PluginRead:
		return allow(a.AllowPluginRead(), "plugin read")
	case Management:
		return allow(a.IsManagement(), "management rights")
	case NodeOnly:
		// Node identity holds with ACLs off too: a node's RPCs (its
		// status, its allocs, its claims) move volumes, and one forged
		// Unpublish freed a live single-writer claim. Only a node's own
		// secret may make them.
		if c.ID.Node == nil {
			return structs.NewError(structs.CodePermissionDenied, "Permission denied: %s needs the calling node's secret", c.Endpoint.Method)
		}
		return c.nodeScope(args)
	}
	return structs.NewError(structs.CodePermissionDenied, "Permission denied: %s has no authorization rule", c.Endpoint.Method)
}

func allow(ok bool, what string) error {
	if ok {
		return nil
	}
	return structs.PermissionDenied(what)
}

// nodeScope lets a node act only on itself.
func (c *Check) nodeScope(args any) error {
	for _, id := range requestNodeIDs(args) {
		if id != c.ID.Node.ID {
			return structs.NewError(structs.CodePermissionDenied,
				"Permission denied: node %s may not act for node %s", c.ID.Node.ID, id)
		}
	}
	return nil
}

// requestNodeIDs are the nodes a node-scoped request acts for.
func requestNodeIDs(args any) []string {
	switch r := args.(type) {
	case *structs.NodeUpdateStatusRequest:
		return []string{r.NodeID}
	case *structs.NodeSpecificRequest:
		return []string{r.NodeID}
	case *structs.NodeRegisterRequest:
		if r.Node != nil {
			return []string{r.Node.ID}
		}
	case *structs.CSIVolumeClaimRequest:
		return []string{r.NodeID}
	case *structs.CSIVolumeUnpublishRequest:
		return []string{r.NodeID}
	case *structs.CSIVolumeClaimProgressRequest:
		return []string{r.NodeID}
	case *structs.CSIVolumeStatsReportRequest:
		return []string{r.NodeID}
	case *structs.AllocUpdateRequest:
		out := make([]string, 0, len(r.Alloc))
		for _, a := range r.Alloc {
			if a != nil {
				out = append(out, a.NodeID)
			}
		}
		return out
	}
	return nil
}

// objectNamespaces are the namespaces of the objects a request writes.
func objectNamespaces(args any) []string {
	var out []string
	switch r := args.(type) {
	case *structs.CSIVolumeRegisterRequest:
		for _, v := range r.Volumes {
			if v != nil {
				out = append(out, orDefault(v.Namespace))
			}
		}
	case *structs.CSIVolumeCreateRequest:
		for _, v := range r.Volumes {
			if v != nil {
				out = append(out, orDefault(v.Namespace))
			}
		}
	case *structs.JobRegisterRequest:
		if r.Job != nil {
			out = append(out, orDefault(r.Job.Namespace))
		}
	}
	return out
}

func orDefault(ns string) string {
	if ns == "" {
		return structs.DefaultNamespace
	}
	return ns
}

// jobVolumes: a job that mounts CSI volumes also needs csi-mount-volume
// in its namespace.
func jobVolumes(c *Check, args any) error {
	r, ok := args.(*structs.JobRegisterRequest)
	if !ok || r.Job == nil {
		return nil
	}
	for _, tg := range r.Job.TaskGroups {
		for _, v := range tg.Volumes {
			if v != nil && v.Type == structs.VolumeTypeCSI {
				return c.Namespace(orDefault(r.Job.Namespace), acl.CapCSIMountVolume)
			}
		}
	}
	return nil
}

// detachForce: forcing a detach frees claims without the node's word, so
// it also needs node write (the right to declare a node's state).
func detachForce(c *Check, args any) error {
	r, ok := args.(*structs.CSIVolumeDetachRequest)
	if !ok || !r.Force {
		return nil
	}
	return allow(c.ID.ACL.AllowNodeWrite() && c.ID.ACL.AllowOperatorWrite(), "node write and operator write (detach -force)")
}
