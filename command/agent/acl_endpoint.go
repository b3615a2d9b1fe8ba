package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/nomad/structs"
)

// The /v1/acl endpoints, in Nomad's shapes. The wire types are api's: the
// state store's token carries a secret hash that must never be encoded.

func (s *HTTPServer) aclBootstrap(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodPost && r.Method != http.MethodPut {
		return nil, methodNotAllowed(r)
	}
	var body api.BootstrapRequest
	if r.ContentLength != 0 {
		if err := decodeOptionalBody(r, &body); err != nil {
			return nil, err
		}
	}
	args := structs.ACLTokenBootstrapRequest{BootstrapSecret: body.BootstrapSecret}
	parseWrite(r, &args.WriteRequest)
	var reply structs.ACLTokenUpsertResponse
	if err := s.agent.RPC(structs.MethodACLBootstrap, &args, &reply); err != nil {
		return nil, err
	}
	setIndex(w, reply.Index)
	if len(reply.Tokens) != 1 {
		return nil, fmt.Errorf("acl bootstrap: got %d tokens back, want 1", len(reply.Tokens))
	}
	return apiToken(reply.Tokens[0]), nil
}

// decodeOptionalBody decodes a JSON body that may be empty.
func decodeOptionalBody(r *http.Request, out any) error {
	err := json.NewDecoder(r.Body).Decode(out)
	if err == nil || err == io.EOF {
		return nil
	}
	return CodedError(http.StatusBadRequest, fmt.Sprintf("decoding request body: %v", err))
}

func (s *HTTPServer) aclPolicies(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	var args structs.GenericRequest
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.ACLPolicyListResponse
	if err := s.agent.RPC(structs.MethodACLListPolicies, &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	out := make([]*api.ACLPolicyListStub, 0, len(reply.Policies))
	for _, p := range reply.Policies {
		out = append(out, &api.ACLPolicyListStub{Name: p.Name, Description: p.Description, CreateIndex: p.CreateIndex, ModifyIndex: p.ModifyIndex})
	}
	return out, nil
}

func (s *HTTPServer) aclPolicy(w http.ResponseWriter, r *http.Request) (any, error) {
	name := strings.TrimPrefix(r.URL.Path, "/v1/acl/policy/")
	if name == "" || strings.Contains(name, "/") {
		return nil, CodedError(http.StatusBadRequest, "missing policy name: use /v1/acl/policy/<name>")
	}
	switch r.Method {
	case http.MethodGet:
		args := structs.ACLPolicySpecificRequest{Name: name}
		if err := parseQuery(r, &args.QueryOptions); err != nil {
			return nil, err
		}
		var reply structs.SingleACLPolicyResponse
		if err := s.agent.RPC(structs.MethodACLGetPolicy, &args, &reply); err != nil {
			return nil, err
		}
		setMeta(w, &reply.QueryMeta)
		p := reply.Policy
		return &api.ACLPolicy{Name: p.Name, Description: p.Description, Rules: p.Rules, CreateIndex: p.CreateIndex, ModifyIndex: p.ModifyIndex}, nil
	case http.MethodPost, http.MethodPut:
		var in api.ACLPolicy
		if err := decodeBody(r, &in); err != nil {
			return nil, err
		}
		if in.Name != "" && in.Name != name {
			return nil, CodedError(http.StatusBadRequest, fmt.Sprintf("policy name %q in the body does not match %q in the URL", in.Name, name))
		}
		args := structs.ACLPolicyUpsertRequest{Policies: []*structs.ACLPolicy{{Name: name, Description: in.Description, Rules: in.Rules}}}
		parseWrite(r, &args.WriteRequest)
		var reply structs.GenericResponse
		if err := s.agent.RPC(structs.MethodACLUpsertPolicies, &args, &reply); err != nil {
			return nil, err
		}
		setIndex(w, reply.Index)
		return nil, nil
	case http.MethodDelete:
		args := structs.ACLPolicyDeleteRequest{Names: []string{name}}
		parseWrite(r, &args.WriteRequest)
		var reply structs.GenericResponse
		if err := s.agent.RPC(structs.MethodACLDeletePolicies, &args, &reply); err != nil {
			return nil, err
		}
		setIndex(w, reply.Index)
		return nil, nil
	}
	return nil, methodNotAllowed(r)
}

func (s *HTTPServer) aclTokens(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	var args structs.GenericRequest
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.ACLTokenListResponse
	if err := s.agent.RPC(structs.MethodACLListTokens, &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	out := make([]*api.ACLTokenListStub, 0, len(reply.Tokens))
	for _, t := range reply.Tokens {
		out = append(out, &api.ACLTokenListStub{
			AccessorID: t.AccessorID, Name: t.Name, Type: t.Type, Policies: nonNil(t.Policies), Global: t.Global,
			CreateTime: t.CreateTime, ExpirationTime: t.ExpirationTime, CreateIndex: t.CreateIndex, ModifyIndex: t.ModifyIndex,
		})
	}
	return out, nil
}

// aclToken serves /v1/acl/token (create), /v1/acl/token/self and
// /v1/acl/token/<accessor> (read, update, delete).
func (s *HTTPServer) aclToken(w http.ResponseWriter, r *http.Request) (any, error) {
	accessor := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/v1/acl/token"), "/")
	if strings.Contains(accessor, "/") {
		return nil, CodedError(http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	}
	switch {
	case accessor == "self" && r.Method == http.MethodGet:
		var args structs.GenericRequest
		if err := parseQuery(r, &args.QueryOptions); err != nil {
			return nil, err
		}
		var reply structs.SingleACLTokenResponse
		if err := s.agent.RPC(structs.MethodACLResolveToken, &args, &reply); err != nil {
			return nil, err
		}
		setMeta(w, &reply.QueryMeta)
		return apiToken(reply.Token), nil
	case accessor != "" && r.Method == http.MethodGet:
		args := structs.ACLTokenSpecificRequest{AccessorID: accessor}
		if err := parseQuery(r, &args.QueryOptions); err != nil {
			return nil, err
		}
		var reply structs.SingleACLTokenResponse
		if err := s.agent.RPC(structs.MethodACLGetToken, &args, &reply); err != nil {
			return nil, err
		}
		setMeta(w, &reply.QueryMeta)
		return apiToken(reply.Token), nil
	case accessor != "" && r.Method == http.MethodDelete:
		args := structs.ACLTokenDeleteRequest{AccessorIDs: []string{accessor}}
		parseWrite(r, &args.WriteRequest)
		var reply structs.GenericResponse
		if err := s.agent.RPC(structs.MethodACLDeleteTokens, &args, &reply); err != nil {
			return nil, err
		}
		setIndex(w, reply.Index)
		return nil, nil
	case r.Method == http.MethodPost || r.Method == http.MethodPut:
		in, err := decodeToken(r)
		if err != nil {
			return nil, err
		}
		if accessor != "" && in.AccessorID != "" && in.AccessorID != accessor {
			return nil, CodedError(http.StatusBadRequest, fmt.Sprintf("accessor %q in the body does not match %q in the URL", in.AccessorID, accessor))
		}
		if accessor == "" && in.AccessorID != "" {
			return nil, CodedError(http.StatusBadRequest, "cannot choose the AccessorID of a new token; POST to /v1/acl/token/<accessor> to update one")
		}
		tok := &structs.ACLToken{AccessorID: accessor, Name: in.Name, Type: in.Type, Policies: in.Policies, Global: in.Global, ExpirationTTL: in.ExpirationTTL}
		if tok.Type == "" {
			tok.Type = structs.ACLClientToken
		}
		args := structs.ACLTokenUpsertRequest{Tokens: []*structs.ACLToken{tok}}
		parseWrite(r, &args.WriteRequest)
		var reply structs.ACLTokenUpsertResponse
		if err := s.agent.RPC(structs.MethodACLUpsertTokens, &args, &reply); err != nil {
			return nil, err
		}
		setIndex(w, reply.Index)
		if len(reply.Tokens) != 1 {
			return nil, fmt.Errorf("acl token write: got %d tokens back, want 1", len(reply.Tokens))
		}
		return apiToken(reply.Tokens[0]), nil
	}
	return nil, methodNotAllowed(r)
}

// decodeToken reads a token body; ExpirationTTL may be nanoseconds (as
// Go's encoding of a Duration) or a string such as "1h" (as Nomad's CLI
// sends it).
func decodeToken(r *http.Request) (*api.ACLToken, error) {
	var raw struct {
		api.ACLToken
		ExpirationTTL json.RawMessage
	}
	if err := decodeBody(r, &raw); err != nil {
		return nil, err
	}
	out := raw.ACLToken
	if len(raw.ExpirationTTL) > 0 && string(raw.ExpirationTTL) != "null" {
		var ns int64
		if err := json.Unmarshal(raw.ExpirationTTL, &ns); err == nil {
			out.ExpirationTTL = time.Duration(ns)
		} else {
			var str string
			if err := json.Unmarshal(raw.ExpirationTTL, &str); err != nil {
				return nil, CodedError(http.StatusBadRequest, "ExpirationTTL: want nanoseconds or a duration string such as \"8h\"")
			}
			if str == "" {
				return &out, nil // Nomad's client sends "" for no expiry
			}
			d, err := time.ParseDuration(str)
			if err != nil {
				return nil, CodedError(http.StatusBadRequest, fmt.Sprintf("ExpirationTTL %q: %v", str, err))
			}
			out.ExpirationTTL = d
		}
	}
	return &out, nil
}

func apiToken(t *structs.ACLToken) *api.ACLToken {
	if t == nil {
		return nil
	}
	return &api.ACLToken{
		AccessorID: t.AccessorID, SecretID: t.SecretID, Name: t.Name, Type: t.Type,
		Policies: nonNil(t.Policies), Global: t.Global, CreateTime: t.CreateTime,
		ExpirationTime: t.ExpirationTime, ExpirationTTL: t.ExpirationTTL,
		CreateIndex: t.CreateIndex, ModifyIndex: t.ModifyIndex,
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// operatorAudit serves GET /v1/operator/audit?n=: the newest entries of
// this agent's server's audit log (management token).
func (s *HTTPServer) operatorAudit(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	srv := s.agent.Server()
	if srv == nil {
		return nil, CodedError(http.StatusBadRequest, "this agent runs no server: ask a server's agent (each server keeps its own audit log)")
	}
	if err := s.authorizeHTTP(r, structs.HTTPAuditLog, ""); err != nil {
		return nil, err
	}
	n := 100
	if v := r.URL.Query().Get("n"); v != "" {
		i, err := strconv.Atoi(v)
		if err != nil || i <= 0 {
			return nil, CodedError(http.StatusBadRequest, fmt.Sprintf("invalid n %q: want a positive integer", v))
		}
		n = i
	}
	entries, err := srv.AuditLog(n)
	if err != nil {
		return nil, err
	}
	out := make([]*api.AuditEntry, 0, len(entries))
	for _, e := range entries {
		out = append(out, &api.AuditEntry{Time: e.Time, Accessor: e.Accessor, Endpoint: e.Endpoint, Object: e.Object, Result: e.Result, Error: e.Error, Index: e.Index})
	}
	return out, nil
}
