package api

import (
	"errors"
	"net/url"
	"time"
)

// ACLPolicy is a named set of ACL rules (Nomad's shape).
type ACLPolicy struct {
	Name        string
	Description string
	Rules       string
	CreateIndex uint64
	ModifyIndex uint64
}

// ACLPolicyListStub is a policy in a list.
type ACLPolicyListStub struct {
	Name        string
	Description string
	CreateIndex uint64
	ModifyIndex uint64
}

// ACLToken is a token. SecretID is set only when the token is created
// (and by token/self).
type ACLToken struct {
	AccessorID     string
	SecretID       string
	Name           string
	Type           string
	Policies       []string
	Global         bool
	CreateTime     time.Time
	ExpirationTime *time.Time    `json:",omitempty"`
	ExpirationTTL  time.Duration `json:",omitempty"`
	CreateIndex    uint64
	ModifyIndex    uint64
}

// ACLTokenListStub is a token in a list.
type ACLTokenListStub struct {
	AccessorID     string
	Name           string
	Type           string
	Policies       []string
	Global         bool
	CreateTime     time.Time
	ExpirationTime *time.Time `json:",omitempty"`
	CreateIndex    uint64
	ModifyIndex    uint64
}

// BootstrapRequest optionally names the bootstrap token's secret.
type BootstrapRequest struct {
	BootstrapSecret string
}

// ACLPolicies is the /v1/acl/polic{y,ies} endpoints.
type ACLPolicies struct{ c *Client }

// ACLPolicies returns the policy endpoints.
func (c *Client) ACLPolicies() *ACLPolicies { return &ACLPolicies{c: c} }

// List lists the policies the token may see.
func (a *ACLPolicies) List(q *QueryOptions) ([]*ACLPolicyListStub, *QueryMeta, error) {
	var out []*ACLPolicyListStub
	qm, err := a.c.query("/v1/acl/policies", &out, q)
	return out, qm, err
}

// Upsert creates or replaces a policy.
func (a *ACLPolicies) Upsert(p *ACLPolicy, w *WriteOptions) (*WriteMeta, error) {
	if p == nil || p.Name == "" {
		return nil, errors.New("missing policy name")
	}
	return a.c.write("POST", "/v1/acl/policy/"+url.PathEscape(p.Name), p, nil, w)
}

// Delete deletes a policy.
func (a *ACLPolicies) Delete(name string, w *WriteOptions) (*WriteMeta, error) {
	if name == "" {
		return nil, errors.New("missing policy name")
	}
	return a.c.write("DELETE", "/v1/acl/policy/"+url.PathEscape(name), nil, nil, w)
}

// Info reads a policy.
func (a *ACLPolicies) Info(name string, q *QueryOptions) (*ACLPolicy, *QueryMeta, error) {
	if name == "" {
		return nil, nil, errors.New("missing policy name")
	}
	var out ACLPolicy
	qm, err := a.c.query("/v1/acl/policy/"+url.PathEscape(name), &out, q)
	if err != nil {
		return nil, qm, err
	}
	return &out, qm, nil
}

// ACLTokens is the /v1/acl/token{,s} and /v1/acl/bootstrap endpoints.
type ACLTokens struct{ c *Client }

// ACLTokens returns the token endpoints.
func (c *Client) ACLTokens() *ACLTokens { return &ACLTokens{c: c} }

// Bootstrap creates the first management token, once per cluster.
func (a *ACLTokens) Bootstrap(w *WriteOptions) (*ACLToken, *WriteMeta, error) {
	return a.BootstrapOpts("", w)
}

// BootstrapOpts bootstraps with a secret chosen by the caller ("" for a
// random one).
func (a *ACLTokens) BootstrapOpts(secret string, w *WriteOptions) (*ACLToken, *WriteMeta, error) {
	var body any
	if secret != "" {
		body = &BootstrapRequest{BootstrapSecret: secret}
	}
	var out ACLToken
	wm, err := a.c.write("POST", "/v1/acl/bootstrap", body, &out, w)
	if err != nil {
		return nil, wm, err
	}
	return &out, wm, nil
}

// List lists tokens (management token only).
func (a *ACLTokens) List(q *QueryOptions) ([]*ACLTokenListStub, *QueryMeta, error) {
	var out []*ACLTokenListStub
	qm, err := a.c.query("/v1/acl/tokens", &out, q)
	return out, qm, err
}

// Create creates a token; the reply carries its secret, the only time it
// is shown.
func (a *ACLTokens) Create(t *ACLToken, w *WriteOptions) (*ACLToken, *WriteMeta, error) {
	if t.AccessorID != "" {
		return nil, nil, errors.New("cannot specify AccessorID to create a token")
	}
	var out ACLToken
	wm, err := a.c.write("POST", "/v1/acl/token", t, &out, w)
	if err != nil {
		return nil, wm, err
	}
	return &out, wm, nil
}

// Update changes a token's name or policies.
func (a *ACLTokens) Update(t *ACLToken, w *WriteOptions) (*ACLToken, *WriteMeta, error) {
	if t.AccessorID == "" {
		return nil, nil, errors.New("missing AccessorID")
	}
	var out ACLToken
	wm, err := a.c.write("POST", "/v1/acl/token/"+url.PathEscape(t.AccessorID), t, &out, w)
	if err != nil {
		return nil, wm, err
	}
	return &out, wm, nil
}

// Delete deletes a token.
func (a *ACLTokens) Delete(accessorID string, w *WriteOptions) (*WriteMeta, error) {
	if accessorID == "" {
		return nil, errors.New("missing AccessorID")
	}
	return a.c.write("DELETE", "/v1/acl/token/"+url.PathEscape(accessorID), nil, nil, w)
}

// Info reads a token (its secret is never returned).
func (a *ACLTokens) Info(accessorID string, q *QueryOptions) (*ACLToken, *QueryMeta, error) {
	if accessorID == "" {
		return nil, nil, errors.New("missing AccessorID")
	}
	var out ACLToken
	qm, err := a.c.query("/v1/acl/token/"+url.PathEscape(accessorID), &out, q)
	if err != nil {
		return nil, qm, err
	}
	return &out, qm, nil
}

// Self reads the token the client sends.
func (a *ACLTokens) Self(q *QueryOptions) (*ACLToken, *QueryMeta, error) {
	var out ACLToken
	qm, err := a.c.query("/v1/acl/token/self", &out, q)
	if err != nil {
		return nil, qm, err
	}
	return &out, qm, nil
}
