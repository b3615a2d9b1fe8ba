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
//	}
//
// With rpc = true the RPC port takes TLS only, and always requires a
// certificate signed by ca_file; Raft takes only server certificates,
// whatever verify_server_hostname says. Certificates reload on SIGHUP.
type TLSConfig struct {
	HTTP                 *bool  `hcl:"http,optional"`
	RPC                  *bool  `hcl:"rpc,optional"`
	CAFile               string `hcl:"ca_file,optional"`
	CertFile             string `hcl:"cert_file,optional"`
	KeyFile              string `hcl:"key_file,optional"`
	VerifyServerHostname *bool  `hcl:"verify_server_hostname,optional"`
	VerifyHTTPSClient    *bool  `hcl:"verify_https_client,optional"`
}

func isTrue(b *bool) bool { return b != nil && *b }

// tlsHTTP and tlsRPC say which listeners use TLS.
func (c *Config) tlsHTTP() bool { return c.TLS != nil && isTrue(c.TLS.HTTP) }
func (c *Config) tlsRPC() bool  { return c.TLS != nil && isTrue(c.TLS.RPC) }

func (t *TLSConfig) files() tlsutil.Files {
	return tlsutil.Files{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile}
}

func (t *TLSConfig) validate() []error {
	if t == nil || (!isTrue(t.HTTP) && !isTrue(t.RPC)) {
		return nil
	}
	var errs []error
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
