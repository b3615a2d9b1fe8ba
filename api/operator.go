package api

import (
	"strconv"
	"time"
)

// Operator holds cluster administration calls.
type Operator struct{ c *Client }

// Operator returns the operator endpoints.
func (c *Client) Operator() *Operator { return &Operator{c: c} }

// RaftServer is one Raft peer.
type RaftServer struct {
	ID           string
	Node         string
	Address      string
	Leader       bool
	Voter        bool
	RaftProtocol string
}

// RaftConfiguration is the Raft peer set.
type RaftConfiguration struct {
	Servers []*RaftServer
	Index   uint64
}

// RaftGetConfiguration lists the Raft peers.
func (o *Operator) RaftGetConfiguration(q *QueryOptions) (*RaftConfiguration, error) {
	var out RaftConfiguration
	_, err := o.c.query("/v1/operator/raft/configuration", &out, q)
	return &out, err
}

// RaftRemovePeerByID removes a peer by its server ID.
func (o *Operator) RaftRemovePeerByID(id string, w *WriteOptions) error {
	_, err := o.c.write("DELETE", "/v1/operator/raft/peer", nil, nil, withParam(w, "id", id))
	return err
}

// RaftRemovePeerByAddress removes a peer by its address.
func (o *Operator) RaftRemovePeerByAddress(addr string, w *WriteOptions) error {
	_, err := o.c.write("DELETE", "/v1/operator/raft/peer", nil, nil, withParam(w, "address", addr))
	return err
}

// RaftAddPeer adds a voter at addr (its ID is asked of the peer when id is
// empty).
func (o *Operator) RaftAddPeer(addr, id string, w *WriteOptions) error {
	w = withParam(w, "address", addr)
	if id != "" {
		w = withParam(w, "id", id)
	}
	_, err := o.c.write("PUT", "/v1/operator/raft/peer", nil, nil, w)
	return err
}

func withParam(w *WriteOptions, k, v string) *WriteOptions {
	out := WriteOptions{}
	if w != nil {
		out = *w
	}
	params := map[string]string{}
	for pk, pv := range out.Params {
		params[pk] = pv
	}
	params[k] = v
	out.Params = params
	return &out
}

// AuditEntry is one line of a server's audit log.
type AuditEntry struct {
	Time     time.Time
	Accessor string
	Endpoint string
	Object   string
	Result   string
	Error    string
	Index    uint64
}

// AuditLog reads the newest n entries of the audit log of the server the
// agent runs (GET /v1/operator/audit); needs a management token.
func (o *Operator) AuditLog(n int, q *QueryOptions) ([]*AuditEntry, error) {
	var out []*AuditEntry
	_, err := o.c.query("/v1/operator/audit", &out, withQueryParams(q, "n", strconv.Itoa(n)))
	return out, err
}
