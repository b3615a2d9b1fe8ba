package api

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLSConfig says how to reach an agent over HTTPS: the CA that signed the
// agent's certificate, and the caller's own certificate when the agent
// requires one (tls.verify_https_client).
type TLSConfig struct {
	// CACert is a PEM file of the CA(s) to trust; empty trusts the
	// system's roots.
	CACert string
	// ClientCert and ClientKey are the PEM certificate and key to present.
	ClientCert string
	ClientKey  string
	// TLSServerName, when set, is the name the agent's certificate must
	// carry instead of the address's host.
	TLSServerName string
	// Insecure skips verifying the agent's certificate. For tests only.
	Insecure bool
}

// envTLS reads BERTH_CACERT, BERTH_CLIENT_CERT, BERTH_CLIENT_KEY,
// BERTH_TLS_SERVER_NAME and BERTH_SKIP_VERIFY, each falling back to its
// NOMAD_ name. It returns nil when none is set.
func envTLS() *TLSConfig {
	get := Getenv
	t := &TLSConfig{
		CACert:        get("CACERT"),
		ClientCert:    get("CLIENT_CERT"),
		ClientKey:     get("CLIENT_KEY"),
		TLSServerName: get("TLS_SERVER_NAME"),
	}
	switch get("SKIP_VERIFY") {
	case "1", "true", "TRUE", "True":
		t.Insecure = true
	}
	if *t == (TLSConfig{}) {
		return nil
	}
	return t
}

// ClientConfig builds the crypto/tls config; errors name the file at
// fault.
func (t *TLSConfig) ClientConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.TLSServerName, InsecureSkipVerify: t.Insecure}
	if t.CACert != "" {
		pem, err := os.ReadFile(t.CACert)
		if err != nil {
			return nil, fmt.Errorf("reading CA certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA certificate %s holds no PEM certificate", t.CACert)
		}
		cfg.RootCAs = pool
	}
	switch {
	case t.ClientCert != "" && t.ClientKey != "":
		cert, err := tls.LoadX509KeyPair(t.ClientCert, t.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("loading client certificate %s with key %s: %w", t.ClientCert, t.ClientKey, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case t.ClientCert != "" || t.ClientKey != "":
		return nil, fmt.Errorf("a client certificate needs both its certificate and its key (got cert %q, key %q)", t.ClientCert, t.ClientKey)
	}
	return cfg, nil
}
