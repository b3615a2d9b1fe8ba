package structs

import (
	"errors"
	"time"
)

// QueryOptions ride on every read RPC.
type QueryOptions struct {
	Region    string
	Namespace string

	// MinQueryIndex makes the query block until the watched tables' index
	// exceeds it, or MaxQueryTime passes.
	MinQueryIndex uint64
	MaxQueryTime  time.Duration

	// AllowStale lets a follower answer from its own state.
	AllowStale bool

	Prefix    string
	Filter    string // go-bexpr expression over the list stubs
	PerPage   int32
	NextToken string
	Reverse   bool

	AuthToken string

	// Forwarded is set once a server has forwarded the request, so that a
	// request is forwarded at most once.
	Forwarded bool

	// deferredAuth is a refusal a follower left for the leader to decide
	// (see DeferAuth). Not encoded: it never leaves the server. A struct,
	// not an error interface, so that requests keep a bounded depth
	// (the Raft entry check skips its decode test for those).
	deferredAuth *Error
}

// QueryMeta comes back with every read.
type QueryMeta struct {
	Index       uint64
	LastContact time.Duration
	KnownLeader bool
	NextToken   string
}

// WriteRequest rides on every write RPC.
type WriteRequest struct {
	Region           string
	Namespace        string
	AuthToken        string
	IdempotencyToken string
	// Forwarded is set once a server has forwarded the request.
	Forwarded bool

	// deferredAuth: see QueryOptions.
	deferredAuth *Error
}

// WriteMeta comes back with every write: the Raft index it was applied at.
type WriteMeta struct {
	Index uint64
}

// RequestNamespace returns the namespace, defaulting to "default".
func (q *QueryOptions) RequestNamespace() string {
	if q.Namespace == "" {
		return DefaultNamespace
	}
	return q.Namespace
}

// RequestNamespace returns the namespace, defaulting to "default".
func (w *WriteRequest) RequestNamespace() string {
	if w.Namespace == "" {
		return DefaultNamespace
	}
	return w.Namespace
}

const (
	// DefaultNamespace is used when a request names none.
	DefaultNamespace = "default"
	// AllNamespaces in a list request means every namespace.
	AllNamespaces = "*"

	// MaxBlockingQueryTime caps ?wait=; DefaultBlockingQueryTime applies
	// when a query gives an index but no wait.
	MaxBlockingQueryTime     = 300 * time.Second
	DefaultBlockingQueryTime = 300 * time.Second
)

// GenericRequest is a read with no arguments of its own.
type GenericRequest struct {
	QueryOptions
}

// GenericResponse is a write that returns only its index.
type GenericResponse struct {
	WriteMeta
}

// RaftPeer is one voter or non-voter in the Raft configuration.
type RaftPeer struct {
	ID       string
	Address  string
	Leader   bool
	Voter    bool
	NodeName string
}

// RaftConfigurationResponse is Operator.RaftGetConfiguration's reply.
type RaftConfigurationResponse struct {
	Servers []*RaftPeer
	Index   uint64
}

// RaftPeerRequest adds or removes a peer.
type RaftPeerRequest struct {
	ID      string
	Address string
	WriteRequest
}

// PeersResponse is Status.Peers's reply.
type PeersResponse struct {
	Peers []string
}

// LeaderResponse is Status.Leader's reply.
type LeaderResponse struct {
	Leader string
}

// PingResponse is Status.Ping's reply.
type PingResponse struct {
	ServerID string
	// Addr is the server's advertised RPC (and Raft) address.
	Addr string
	// Name is the server's node name.
	Name string
}

// RPCInfo is what the forwarding half of every endpoint needs to know.
type RPCInfo interface {
	// IsRead reports whether the request only reads state.
	IsRead() bool
	// AllowStaleRead reports whether a follower may answer.
	AllowStaleRead() bool
	// IsForwarded reports whether a server already forwarded the request.
	IsForwarded() bool
	// SetForwarded marks the request as forwarded.
	SetForwarded()
}

func (q *QueryOptions) IsRead() bool         { return true }
func (q *QueryOptions) AllowStaleRead() bool { return q.AllowStale }
func (q *QueryOptions) IsForwarded() bool    { return q.Forwarded }
func (q *QueryOptions) SetForwarded()        { q.Forwarded = true }

func (w *WriteRequest) IsRead() bool         { return false }
func (w *WriteRequest) AllowStaleRead() bool { return false }
func (w *WriteRequest) IsForwarded() bool    { return w.Forwarded }
func (w *WriteRequest) SetForwarded()        { w.Forwarded = true }

// AuthDeferrer is a request whose authorization a follower may leave to
// the leader. A follower's state lags the leader's by the writes not yet
// applied there: a node registered through it, or a token created through
// it, is not there yet when the next call arrives, and refusing it would
// answer from stale state what the leader, which checks every call it
// receives, answers correctly. A server that ends up serving such a
// request itself must authorize it again before it runs.
type AuthDeferrer interface {
	// DeferAuth records the refusal this server would have answered.
	DeferAuth(err error)
	// DeferredAuth is that refusal, nil when there is none.
	DeferredAuth() error
}

func (q *QueryOptions) DeferAuth(err error) { q.deferredAuth = asError(err) }
func (q *QueryOptions) DeferredAuth() error { return errOrNil(q.deferredAuth) }
func (w *WriteRequest) DeferAuth(err error) { w.deferredAuth = asError(err) }
func (w *WriteRequest) DeferredAuth() error { return errOrNil(w.deferredAuth) }

// asError keeps err's code and message; nil stays nil.
func asError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeOf(err), Msg: err.Error()}
}

// errOrNil returns e as an error, and a nil *Error as a nil error.
func errOrNil(e *Error) error {
	if e == nil {
		return nil
	}
	return e
}

// GetAuthToken returns the secret the request carries (an ACL token's, or a
// node's for the client's own RPCs).
func (q *QueryOptions) GetAuthToken() string { return q.AuthToken }

// GetAuthToken returns the secret the request carries.
func (w *WriteRequest) GetAuthToken() string { return w.AuthToken }

// SetAuthToken sets the secret the request carries.
func (q *QueryOptions) SetAuthToken(t string) { q.AuthToken = t }

// SetAuthToken sets the secret the request carries.
func (w *WriteRequest) SetAuthToken(t string) { w.AuthToken = t }

// AuthRequest is what authorization reads from every request.
type AuthRequest interface {
	GetAuthToken() string
	SetAuthToken(string)
	RequestNamespace() string
}

// WriteIndex is the Raft index a write was applied at (for the audit log).
func (w *WriteMeta) WriteIndex() uint64 { return w.Index }
