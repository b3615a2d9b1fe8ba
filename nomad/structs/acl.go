package structs

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"time"
)

// ACL token types.
const (
	ACLClientToken     = "client"
	ACLManagementToken = "management"
)

// AnonymousPolicyName is the policy that applies to requests with no token.
const AnonymousPolicyName = "anonymous"

// ACLPolicy is a named set of rules (nomad/acl's language) in Raft.
type ACLPolicy struct {
	Name        string
	Description string
	Rules       string
	CreateIndex uint64
	ModifyIndex uint64
}

// Stub is the list form of a policy.
func (p *ACLPolicy) Stub() *ACLPolicyListStub {
	return &ACLPolicyListStub{Name: p.Name, Description: p.Description, CreateIndex: p.CreateIndex, ModifyIndex: p.ModifyIndex}
}

// ACLPolicyListStub is a policy in a list.
type ACLPolicyListStub struct {
	Name        string
	Description string
	CreateIndex uint64
	ModifyIndex uint64
}

// validPolicyName: 1 to 128 ASCII letters, digits, '-' or '_'. A loop, not
// a regexp: ^[...]{1,128}$ compiles to 128 copies of the class, at every
// start of the berth binary (~0.3 ms and 1,700 allocations of package
// init, which the CLI and every process started from it paid).
func validPolicyName(name string) bool {
	if len(name) < 1 || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Validate checks the policy's name; its rules are checked by nomad/acl.
func (p *ACLPolicy) Validate() error {
	if !validPolicyName(p.Name) {
		return NewError(CodeInvalid, "invalid policy name %q: use 1-128 letters, digits, '-' or '_'", p.Name)
	}
	if len(p.Description) > 256 {
		return NewError(CodeInvalid, "policy %q: description longer than 256 characters", p.Name)
	}
	return nil
}

// ACLToken is a token. The state store keeps SecretHash, never SecretID:
// a stolen snapshot or Raft log does not hand out working tokens. The
// secret is shown once, in the reply that creates the token.
type ACLToken struct {
	AccessorID string
	// SecretID is set only in the reply that creates the token (and in
	// token/self, echoing what the caller sent).
	SecretID   string
	SecretHash string
	Name       string
	Type       string
	Policies   []string
	Global     bool

	CreateTime     time.Time
	ExpirationTime *time.Time `json:",omitempty"`
	ExpirationTTL  time.Duration

	CreateIndex uint64
	ModifyIndex uint64
}

// HashSecret is how secrets are kept at rest: hex SHA-256. Secrets are
// random UUIDs (122 bits), so an unsalted fast hash is enough.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// SecretMatches compares secret with the stored hash in constant time.
func (t *ACLToken) SecretMatches(secret string) bool {
	return subtle.ConstantTimeCompare([]byte(HashSecret(secret)), []byte(t.SecretHash)) == 1
}

// IsManagement reports whether the token may do everything.
func (t *ACLToken) IsManagement() bool { return t.Type == ACLManagementToken }

// IsExpired reports whether the token has expired at now.
func (t *ACLToken) IsExpired(now time.Time) bool {
	return t.ExpirationTime != nil && !t.ExpirationTime.IsZero() && !now.Before(*t.ExpirationTime)
}

// Copy returns a deep copy.
func (t *ACLToken) Copy() *ACLToken {
	if t == nil {
		return nil
	}
	out := *t
	out.Policies = append([]string(nil), t.Policies...)
	if t.ExpirationTime != nil {
		e := *t.ExpirationTime
		out.ExpirationTime = &e
	}
	return &out
}

// Sanitized is the token as reads return it: no secret, no hash.
func (t *ACLToken) Sanitized() *ACLToken {
	out := t.Copy()
	out.SecretID = ""
	out.SecretHash = ""
	return out
}

// Stub is the list form of a token.
func (t *ACLToken) Stub() *ACLTokenListStub {
	return &ACLTokenListStub{
		AccessorID: t.AccessorID, Name: t.Name, Type: t.Type, Policies: t.Policies,
		Global: t.Global, CreateTime: t.CreateTime, ExpirationTime: t.ExpirationTime,
		CreateIndex: t.CreateIndex, ModifyIndex: t.ModifyIndex,
	}
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

// Validate checks a token a caller asks to create or update.
func (t *ACLToken) Validate() error {
	switch t.Type {
	case ACLClientToken:
		if len(t.Policies) == 0 {
			return NewError(CodeInvalid, "client token %q has no policies: name at least one with -policy", t.Name)
		}
	case ACLManagementToken:
		if len(t.Policies) != 0 {
			return NewError(CodeInvalid, "management token %q cannot have policies: it may already do everything", t.Name)
		}
	default:
		return NewError(CodeInvalid, "token type %q: use %q or %q", t.Type, ACLClientToken, ACLManagementToken)
	}
	if len(t.Name) > 256 {
		return NewError(CodeInvalid, "token name longer than 256 characters")
	}
	if t.ExpirationTTL < 0 {
		return NewError(CodeInvalid, "token %q: negative expiration TTL %s", t.Name, t.ExpirationTTL)
	}
	if t.ExpirationTTL > 0 && t.ExpirationTTL < time.Minute {
		return NewError(CodeInvalid, "token %q: expiration TTL %s is under the 1m minimum", t.Name, t.ExpirationTTL)
	}
	return nil
}

// ACLPolicyUpsertRequest writes policies.
type ACLPolicyUpsertRequest struct {
	Policies []*ACLPolicy
	WriteRequest
}

// ACLPolicyDeleteRequest deletes policies by name.
type ACLPolicyDeleteRequest struct {
	Names []string
	WriteRequest
}

// ACLPolicySpecificRequest reads one policy.
type ACLPolicySpecificRequest struct {
	Name string
	QueryOptions
}

// SingleACLPolicyResponse is one policy.
type SingleACLPolicyResponse struct {
	Policy *ACLPolicy
	QueryMeta
}

// ACLPolicyListResponse lists policies.
type ACLPolicyListResponse struct {
	Policies []*ACLPolicyListStub
	QueryMeta
}

// ACLTokenUpsertRequest creates or updates tokens. In the Raft entry the
// tokens carry SecretHash and no SecretID.
type ACLTokenUpsertRequest struct {
	Tokens []*ACLToken
	WriteRequest
}

// ACLTokenUpsertResponse returns the written tokens (with their secret
// when they were just created).
type ACLTokenUpsertResponse struct {
	Tokens []*ACLToken
	WriteMeta
}

// ACLTokenDeleteRequest deletes tokens by accessor.
type ACLTokenDeleteRequest struct {
	AccessorIDs []string
	WriteRequest
}

// ACLTokenSpecificRequest reads one token by accessor.
type ACLTokenSpecificRequest struct {
	AccessorID string
	QueryOptions
}

// SingleACLTokenResponse is one token.
type SingleACLTokenResponse struct {
	Token *ACLToken
	QueryMeta
}

// ACLTokenListResponse lists tokens.
type ACLTokenListResponse struct {
	Tokens []*ACLTokenListStub
	QueryMeta
}

// ACLTokenBootstrapRequest creates the first management token, once.
type ACLTokenBootstrapRequest struct {
	Token *ACLToken
	// BootstrapSecret, if set, is the secret to give the token (for
	// automation that must know it in advance).
	BootstrapSecret string
	WriteRequest
}

// ACLBootstrapIndexKey is the index-table key recording that the ACL
// system was bootstrapped, and at which Raft index.
const ACLBootstrapIndexKey = "acl_token_bootstrap"

// ErrACLBootstrapped is returned by a second bootstrap.
func ErrACLBootstrapped(index uint64) error {
	return NewError(CodeConflict, "ACL bootstrap already done (at raft index %d); use the management token it returned", index)
}

// PermissionDenied names what the token lacks, e.g. "token lacks
// csi-write-volume in namespace default".
func PermissionDenied(what string) error {
	return &Error{Code: CodePermissionDenied, Msg: fmt.Sprintf("Permission denied: token lacks %s", what)}
}
