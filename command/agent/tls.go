package agent

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/berth-io/berth/helper/tlsutil"
)

// TLSConfig is the agent config's `tls {}` block, with Nomad's meaning:
//
//	tls {
//	  http = true   # HTTPS for the API
//	  rpc  = true   # mTLS on the RPC port: RPC, Raft, node sessions
//	  ca_file   = "berth-agent-ca.pem"
//	  cert_file = "global-server-berth.pem"
//	  key_file  = "global-server-berth-key.pem"
//	  verify_server_hostname = true  # clients check they talk to server.<region>.berth
//	  verify_https_client    = true  # HTTPS callers must present a certificate
//	  tls_min_version        = "tls13" # or "tls12", the default
//	}
//
// With rpc = true the RPC port takes TLS only, and always requires a
// certificate signed by ca_file; Raft takes only server certificates,
// whatever verify_server_hostname says. Certificates reload on SIGHUP.
//
// tls_min_version holds for the HTTPS and RPC listeners and for the
// agent's own dials. Nomad's rpc_upgrade_mode (plain and TLS RPC on one
// port during a rollout) is refused when true: see validate.
type TLSConfig struct {
	HTTP                 *bool  `hcl:"http,optional"`
	RPC                  *bool  `hcl:"rpc,optional"`
	CAFile               string `hcl:"ca_file,optional"`
	CertFile             string `hcl:"cert_file,optional"`
	KeyFile              string `hcl:"key_file,optional"`
	VerifyServerHostname *bool  `hcl:"verify_server_hostname,optional"`
	VerifyHTTPSClient    *bool  `hcl:"verify_https_client,optional"`
	TLSMinVersion        string `hcl:"tls_min_version,optional"`
	RPCUpgradeMode       *bool  `hcl:"rpc_upgrade_mode,optional"`
}

func isTrue(b *bool) bool { return b != nil && *b }

// tlsHTTP and tlsRPC say which listeners use TLS.
func (c *Config) tlsHTTP() bool { return c.TLS != nil && isTrue(c.TLS.HTTP) }
func (c *Config) tlsRPC() bool  { return c.TLS != nil && isTrue(c.TLS.RPC) }

// files is what tlsutil loads; validate has checked TLSMinVersion.
func (t *TLSConfig) files() tlsutil.Files {
	v, _ := tlsutil.ParseMinVersion(t.TLSMinVersion)
	return tlsutil.Files{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, MinVersion: v}
}

// errRPCUpgradeMode explains why rpc_upgrade_mode = true is refused.
// While it is on, Nomad's RPC port takes plaintext connections next to
// TLS ones, and on Berth's port plaintext means Raft (byte 0x02) and node
// sessions with no certificate: the forged AppendEntries that tls.rpc
// exists to stop would get in again for as long as a rollout lasts, and
// rollouts have a way of never being finished.
var errRPCUpgradeMode = errors.New("tls.rpc_upgrade_mode = true is refused: while it is on, the RPC port would take plaintext Raft and RPC " +
	"from anyone who can reach it, which is what tls.rpc is there to stop. To move a cluster to TLS, put the same tls {} block " +
	"on every agent and restart them (servers one at a time keep a quorum once a majority has TLS); leave rpc_upgrade_mode out")

func (t *TLSConfig) validate() []error {
	if t == nil {
		return nil
	}
	var errs []error
	// Checked even with TLS off, so a typo cannot wait for the day TLS
	// is turned on.
	if _, err := tlsutil.ParseMinVersion(t.TLSMinVersion); err != nil {
		errs = append(errs, fmt.Errorf("tls.%w", err))
	}
	if isTrue(t.RPCUpgradeMode) {
		errs = append(errs, errRPCUpgradeMode)
	}
	if !isTrue(t.HTTP) && !isTrue(t.RPC) {
		return errs
	}
	for name, v := range map[string]string{"ca_file": t.CAFile, "cert_file": t.CertFile, "key_file": t.KeyFile} {
		if v == "" {
			errs = append(errs, fmt.Errorf("tls.%s is required with tls.http or tls.rpc (berth tls ca create and berth tls cert create make a dev PKI)", name))
		}
	}
	return errs
}

func mergeTLS(c, o *TLSConfig) *TLSConfig {
	if o == nil {
		return c
	}
	out := TLSConfig{}
	if c != nil {
		out = *c
	}
	if o.HTTP != nil {
		out.HTTP = o.HTTP
	}
	if o.RPC != nil {
		out.RPC = o.RPC
	}
	if o.CAFile != "" {
		out.CAFile = o.CAFile
	}
	if o.CertFile != "" {
		out.CertFile = o.CertFile
	}
	if o.KeyFile != "" {
		out.KeyFile = o.KeyFile
	}
	if o.VerifyServerHostname != nil {
		out.VerifyServerHostname = o.VerifyServerHostname
	}
	if o.VerifyHTTPSClient != nil {
		out.VerifyHTTPSClient = o.VerifyHTTPSClient
	}
	if o.TLSMinVersion != "" {
		out.TLSMinVersion = o.TLSMinVersion
	}
	if o.RPCUpgradeMode != nil {
		out.RPCUpgradeMode = o.RPCUpgradeMode
	}
	return &out
}

// setupTLS loads the agent's certificates when either listener uses TLS,
// and warns when the certificate does not fit the agent's role: a server
// without server.<region>.berth cannot join the other servers' Raft.
func (a *Agent) setupTLS() error {
	cfg := a.config
	if !cfg.tlsHTTP() && !cfg.tlsRPC() {
		return nil
	}
	r, err := tlsutil.NewReloader(cfg.TLS.files())
	if err != nil {
		return err
	}
	a.tls = r
	if cfg.ServerEnabled() && cfg.tlsRPC() && !r.HasRole(tlsutil.RoleServer, cfg.Region) {
		a.logger.Warn("tls: this server's certificate does not name "+tlsutil.RoleServer.Name(cfg.Region)+"; other servers will refuse its raft and forwarded rpcs",
			"cert_file", cfg.TLS.CertFile, "names", r.Leaf().DNSNames)
	}
	return nil
}

// httpTLS is the HTTPS config, or nil for plain HTTP.
func (a *Agent) httpTLS() *tls.Config {
	if a == nil || a.config == nil || !a.config.tlsHTTP() || a.tls == nil {
		return nil
	}
	auth := tls.NoClientCert
	if isTrue(a.config.TLS.VerifyHTTPSClient) {
		auth = tls.RequireAndVerifyClientCert
	}
	return a.tls.IncomingConfig(auth)
}

// ReloadTLS reads the certificate files again (SIGHUP). New connections
// use the new certificates; open ones, Raft's among them, carry on.
func (a *Agent) ReloadTLS() error {
	if a.tls == nil {
		return errors.New("tls is not enabled in this agent's config: nothing to reload")
	}
	if err := a.tls.Reload(); err != nil {
		return fmt.Errorf("reloading tls certificates (the old ones stay in use): %w", err)
	}
	a.logger.Info("tls: certificates reloaded", "cert_file", a.config.TLS.CertFile, "serial", a.tls.Leaf().SerialNumber.String())
	return nil
}

// clientTLS gives the client's dials to the servers their TLS config, or
// is nil without tls.rpc. With verify_server_hostname the server must hold
// server.<region>.berth; without, any certificate of the CA will do.
func (a *Agent) clientTLS() func() *tls.Config {
	cfg := a.config
	if !cfg.tlsRPC() || a.tls == nil {
		return nil
	}
	name := ""
	if isTrue(cfg.TLS.VerifyServerHostname) {
		name = tlsutil.RoleServer.Name(cfg.Region)
	}
	r := a.tls
	return func() *tls.Config { return r.OutgoingConfig(name) }
}
