package agent

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/testutil"
)

// newACLAgent starts a -dev agent with ACLs on and an audit log.
func newACLAgent(t *testing.T) (*Agent, string) {
	t.Helper()
	cfg := DevConfig()
	cfg.Ports = &Ports{HTTP: intPtr(0), RPC: intPtr(0)}
	cfg.LogLevel = "OFF"
	cfg.DevPlugin = nil
	auditPath := filepath.Join(t.TempDir(), "audit.log")
	cfg.ACL = &ACLConfig{Enabled: boolPtr(true), AuditLog: auditPath}
	a, err := NewAgent(cfg, io.Discard)
	must.NoError(t, err)
	t.Cleanup(func() { a.Shutdown() })
	testutil.WaitForResult(t, func() (bool, error) { return a.Server().Leader() != "", nil })
	return a, auditPath
}

func apiClient(t *testing.T, a *Agent, token string) *api.Client {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: "http://" + a.HTTPAddr(), Token: token})
	must.NoError(t, err)
	return c
}

func TestHTTP_ACLs(t *testing.T) {
	a, auditPath := newACLAgent(t)
	anon := apiClient(t, a, "")

	// Health and leader need no token; everything else does.
	resp, _ := get(t, a, "/v1/status/leader")
	must.Eq(t, http.StatusOK, resp.StatusCode)
	resp, _ = get(t, a, "/v1/agent/health")
	must.Eq(t, http.StatusOK, resp.StatusCode)
	resp, body := get(t, a, "/v1/jobs")
	must.Eq(t, http.StatusForbidden, resp.StatusCode)
	must.StrContains(t, body, "token lacks list-jobs in namespace default")
	resp, _ = get(t, a, "/v1/agent/self")
	must.Eq(t, http.StatusForbidden, resp.StatusCode)

	boot, _, err := anon.ACLTokens().Bootstrap(nil)
	must.NoError(t, err)
	must.Eq(t, "management", boot.Type)
	_, _, err = anon.ACLTokens().Bootstrap(nil)
	must.ErrorContains(t, err, "already done")
	mgmt := apiClient(t, a, boot.SecretID)

	// A malformed policy is refused with where.
	_, err = mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: "bad", Rules: "namespace \"default\" {\n  policy = \"reed\"\n}\n"}, nil)
	must.ErrorContains(t, err, `bad:2:12: invalid policy "reed"`)

	_, err = mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: "csi-read", Description: "read volumes",
		Rules: `namespace "default" { capabilities = ["csi-read-volume", "csi-list-volume"] }`}, nil)
	must.NoError(t, err)
	tok, _, err := mgmt.ACLTokens().Create(&api.ACLToken{Name: "reader", Type: "client", Policies: []string{"csi-read"}}, nil)
	must.NoError(t, err)
	must.UUIDv4(t, tok.SecretID)
	reader := apiClient(t, a, tok.SecretID)

	// csi-read-volume reads but cannot register: 403 names the capability.
	_, _, err = reader.CSIVolumes().List(nil)
	must.NoError(t, err)
	_, err = reader.CSIVolumes().Register(apiVolume("v1", "hostpath"), nil)
	must.ErrorContains(t, err, "token lacks csi-write-volume in namespace default")
	var se *api.StatusError
	must.True(t, errors.As(err, &se))
	must.Eq(t, http.StatusForbidden, se.Code)

	// token/self shows the caller's own token; info never shows a secret.
	self, _, err := reader.ACLTokens().Self(nil)
	must.NoError(t, err)
	must.Eq(t, tok.AccessorID, self.AccessorID)
	info, _, err := mgmt.ACLTokens().Info(tok.AccessorID, nil)
	must.NoError(t, err)
	must.Eq(t, "", info.SecretID)
	_, _, err = reader.ACLTokens().Info(boot.AccessorID, nil)
	must.ErrorContains(t, err, "Permission denied")

	// A client token sees only its own policies.
	ps, _, err := reader.ACLPolicies().List(nil)
	must.NoError(t, err)
	must.Len(t, 1, ps)
	tl, _, err := mgmt.ACLTokens().List(nil)
	must.NoError(t, err)
	must.Len(t, 2, tl)

	// Update keeps the secret; delete revokes it.
	tok.Name = "renamed"
	upd, _, err := mgmt.ACLTokens().Update(tok, nil)
	must.NoError(t, err)
	must.Eq(t, "renamed", upd.Name)
	_, _, err = reader.ACLTokens().Self(nil)
	must.NoError(t, err)
	_, err = mgmt.ACLTokens().Delete(tok.AccessorID, nil)
	must.NoError(t, err)
	_, _, err = reader.ACLTokens().Self(nil)
	must.ErrorContains(t, err, "ACL token not found")

	// The audit log has every write and the refused write, and no read.
	entries, err := mgmt.Operator().AuditLog(100, nil)
	must.NoError(t, err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Endpoint+" "+e.Result)
		must.StrNotContains(t, e.Object+e.Error, boot.SecretID)
	}
	must.Eq(t, []string{
		"ACL.Bootstrap ok", "ACL.Bootstrap error", "ACL.UpsertPolicies error", "ACL.UpsertPolicies ok",
		"ACL.UpsertTokens ok", "CSIVolume.Register denied", "ACL.UpsertTokens ok", "ACL.DeleteTokens ok",
	}, got)
	raw, err := os.ReadFile(auditPath)
	must.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var m map[string]any
		must.NoError(t, json.Unmarshal([]byte(line), &m), must.Sprintf("not a JSON line: %q", line))
		must.NotEq(t, "", m["Accessor"])
	}
	resp, _ = get(t, a, "/v1/operator/audit")
	must.Eq(t, http.StatusForbidden, resp.StatusCode)
}
