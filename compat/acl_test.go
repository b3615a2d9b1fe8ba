package compat

import (
	"errors"
	"io"
	"strings"
	"testing"

	nomad "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/command/agent"
	"github.com/berth-io/berth/testutil"
)

// Nomad's own API client bootstraps Berth's ACLs, writes a policy and a
// token, and is then refused or served by what the token allows.
func TestCompat_ACLs(t *testing.T) {
	cfg := agent.DevConfig()
	zero := 0
	on := true
	cfg.Ports = &agent.Ports{HTTP: &zero, RPC: &zero}
	cfg.LogLevel = "OFF"
	cfg.DevPlugin = nil
	cfg.ACL = &agent.ACLConfig{Enabled: &on}
	a, err := agent.NewAgent(cfg, io.Discard)
	must.NoError(t, err)
	t.Cleanup(func() { a.Shutdown() })
	testutil.WaitForResult(t, func() (bool, error) {
		if a.Server().Leader() == "" {
			return false, errors.New("no leader yet")
		}
		return true, nil
	})
	addr := "http://" + a.HTTPAddr()
	anon, err := nomad.NewClient(&nomad.Config{Address: addr})
	must.NoError(t, err)

	boot, _, err := anon.ACLTokens().Bootstrap(nil)
	must.NoError(t, err)
	must.Eq(t, "management", boot.Type)
	must.NotEq(t, "", boot.SecretID)

	mgmt, err := nomad.NewClient(&nomad.Config{Address: addr, SecretID: boot.SecretID})
	must.NoError(t, err)
	_, err = mgmt.ACLPolicies().Upsert(&nomad.ACLPolicy{Name: "vol-read", Description: "volumes, read only",
		Rules: `namespace "default" { capabilities = ["csi-list-volume", "csi-read-volume"] }`}, nil)
	must.NoError(t, err)
	pol, _, err := mgmt.ACLPolicies().Info("vol-read", nil)
	must.NoError(t, err)
	must.StrContains(t, pol.Rules, "csi-read-volume")
	pols, _, err := mgmt.ACLPolicies().List(nil)
	must.NoError(t, err)
	must.Len(t, 1, pols)

	tok, _, err := mgmt.ACLTokens().Create(&nomad.ACLToken{Name: "reader", Type: "client", Policies: []string{"vol-read"}}, nil)
	must.NoError(t, err)
	must.NotEq(t, "", tok.SecretID)
	toks, _, err := mgmt.ACLTokens().List(nil)
	must.NoError(t, err)
	must.Len(t, 2, toks)

	reader, err := nomad.NewClient(&nomad.Config{Address: addr, SecretID: tok.SecretID})
	must.NoError(t, err)
	self, _, err := reader.ACLTokens().Self(nil)
	must.NoError(t, err)
	must.Eq(t, tok.AccessorID, self.AccessorID)
	must.Eq(t, []string{"vol-read"}, self.Policies)

	_, _, err = reader.CSIVolumes().List(nil)
	must.NoError(t, err)
	_, err = reader.CSIVolumes().Register(testVolume("v1"), nil)
	must.Error(t, err)
	must.True(t, strings.Contains(err.Error(), "403") && strings.Contains(err.Error(), "csi-write-volume"), must.Sprint(err))
	_, _, err = reader.Jobs().List(nil)
	must.ErrorContains(t, err, "list-jobs")

	_, err = mgmt.ACLTokens().Delete(tok.AccessorID, nil)
	must.NoError(t, err)
	_, _, err = reader.ACLTokens().Self(nil)
	must.ErrorContains(t, err, "403")
}
