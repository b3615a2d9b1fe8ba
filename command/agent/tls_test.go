package agent

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/helper/tlsutil"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
)

// writePKI writes a CA, a server and a CLI certificate into dir.
func writePKI(t *testing.T, dir string) {
	t.Helper()
	ca, key, err := tlsutil.GenerateCA(tlsutil.CAOptions{})
	must.NoError(t, err)
	must.NoError(t, os.WriteFile(filepath.Join(dir, "ca.pem"), ca, 0o600))
	for _, role := range []tlsutil.Role{tlsutil.RoleServer, tlsutil.RoleCLI} {
		c, k, err := tlsutil.GenerateCert(ca, key, tlsutil.CertOptions{Role: role})
		must.NoError(t, err)
		must.NoError(t, os.WriteFile(filepath.Join(dir, string(role)+".pem"), c, 0o600))
		must.NoError(t, os.WriteFile(filepath.Join(dir, string(role)+"-key.pem"), k, 0o600))
	}
}

func TestTLSConfig_ParseAndValidate(t *testing.T) {
	src := `
tls {
  http = true
  rpc  = true
  ca_file   = "ca.pem"
  cert_file = "server.pem"
  key_file  = "server-key.pem"
  verify_server_hostname = true
  verify_https_client    = true
}
`
	c, err := ParseConfig("agent.hcl", []byte(src))
	must.NoError(t, err)
	merged := DevConfig().Merge(c)
	must.True(t, merged.tlsHTTP())
	must.True(t, merged.tlsRPC())
	must.True(t, *merged.TLS.VerifyServerHostname)
	must.True(t, *merged.TLS.VerifyHTTPSClient)
	must.Eq(t, "server-key.pem", merged.TLS.KeyFile)
	must.NoError(t, merged.Validate())

	// A later file overrides one field and keeps the rest.
	o, err := ParseConfig("more.hcl", []byte("tls {\n  http = false\n}\n"))
	must.NoError(t, err)
	merged = merged.Merge(o)
	must.False(t, merged.tlsHTTP())
	must.Eq(t, "ca.pem", merged.TLS.CAFile)

	bad, err := ParseConfig("agent.hcl", []byte("tls {\n  rpc = true\n  ca_file = \"ca.pem\"\n}\n"))
	must.NoError(t, err)
	err = DevConfig().Merge(bad).Validate()
	must.ErrorContains(t, err, "tls.cert_file is required with tls.http or tls.rpc")
	must.ErrorContains(t, err, "tls.key_file is required")

	// tls_min_version takes Nomad's tls12 and tls13, and a typo is refused
	// even while TLS is off; rpc_upgrade_mode = true is refused with why.
	v13, err := ParseConfig("agent.hcl", []byte("tls {\n  tls_min_version = \"tls13\"\n}\n"))
	must.NoError(t, err)
	merged = merged.Merge(v13)
	must.NoError(t, merged.Validate())
	must.Eq(t, tls.VersionTLS13, merged.TLS.files().MinVersion)
	must.Eq(t, tls.VersionTLS12, DevConfig().Merge(c).TLS.files().MinVersion, must.Sprint("the default is tls12"))
	for src, want := range map[string]string{
		"tls {\n  tls_min_version = \"tls10\"\n}\n": `tls.tls_min_version "tls10" is refused: TLS 1.0 and 1.1 are deprecated`,
		"tls {\n  tls_min_version = \"1.3\"\n}\n":   `tls.tls_min_version "1.3" is not a TLS version: use "tls12" (the default) or "tls13"`,
		"tls {\n  rpc_upgrade_mode = true\n}\n":     "tls.rpc_upgrade_mode = true is refused: while it is on, the RPC port would take plaintext Raft",
	} {
		fc, err := ParseConfig("agent.hcl", []byte(src))
		must.NoError(t, err)
		must.ErrorContains(t, DevConfig().Merge(fc).Validate(), want)
	}
	off, err := ParseConfig("agent.hcl", []byte("tls {\n  rpc_upgrade_mode = false\n}\n"))
	must.NoError(t, err)
	must.NoError(t, DevConfig().Merge(off).Validate(), must.Sprint("rpc_upgrade_mode = false is what Berth does anyway"))

	_, err = ParseConfig("agent.hcl", []byte("tls {\n  verify_incoming = true\n}\n"))
	must.ErrorContains(t, err, `agent.hcl:2,3: Unsupported argument; An argument named "verify_incoming"`)
}

// A -dev agent with tls.http, tls.rpc and verify_https_client: the API
// answers HTTPS to a caller with a certificate only, and its own client
// opens its node session over mutual TLS.
func TestAgent_TLS(t *testing.T) {
	dir := t.TempDir()
	writePKI(t, dir)
	fc, err := ParseConfig("agent.hcl", []byte(fmt.Sprintf(`
tls {
  http = true
  rpc  = true
  ca_file   = %[1]q
  cert_file = %[2]q
  key_file  = %[3]q
  verify_server_hostname = true
  verify_https_client    = true
  tls_min_version        = "tls13"
}
`, filepath.Join(dir, "ca.pem"), filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"))))
	must.NoError(t, err)
	cfg := DevConfig().Merge(fc)
	cfg.Ports = &Ports{HTTP: intPtr(0), RPC: intPtr(0)}
	cfg.LogLevel = "OFF"
	a, err := NewAgent(cfg, io.Discard)
	must.NoError(t, err)
	t.Cleanup(func() { a.Shutdown() })
	must.Eq(t, "https://"+a.HTTPAddr(), a.HTTPURL())
	testutil.WaitForResult(t, func() (bool, error) { return a.Server().Leader() != "", nil })

	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	must.NoError(t, err)
	pool := x509.NewCertPool()
	must.True(t, pool.AppendCertsFromPEM(caPEM))
	cli, err := tls.LoadX509KeyPair(filepath.Join(dir, "cli.pem"), filepath.Join(dir, "cli-key.pem"))
	must.NoError(t, err)
	httpsGet := func(certs []tls.Certificate, maxVersion ...uint16) (*http.Response, error) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}
		if len(maxVersion) > 0 {
			tr.TLSClientConfig.MaxVersion = maxVersion[0]
		}
		defer tr.CloseIdleConnections()
		return (&http.Client{Transport: tr}).Get(a.HTTPURL() + "/v1/agent/health")
	}

	resp, err := httpsGet([]tls.Certificate{cli})
	must.NoError(t, err)
	resp.Body.Close()
	must.Eq(t, http.StatusOK, resp.StatusCode)

	_, err = httpsGet(nil)
	must.Error(t, err, must.Sprint("verify_https_client: a caller without a certificate is refused"))

	_, err = httpsGet([]tls.Certificate{cli}, tls.VersionTLS12)
	must.ErrorContains(t, err, "protocol version", must.Sprint("tls_min_version = tls13: a TLS 1.2 caller is refused"))

	// The RPC port: byte 0x04 then TLS; a TLS 1.2 dial is refused there too.
	rc, err := net.Dial("tcp", a.Server().RPCAddr())
	must.NoError(t, err)
	defer rc.Close()
	_, err = rc.Write([]byte{0x04})
	must.NoError(t, err)
	srvCert, err := tls.LoadX509KeyPair(filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"))
	must.NoError(t, err)
	old := tls.Client(rc, &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{srvCert}, ServerName: "server.global.berth", MaxVersion: tls.VersionTLS12})
	must.ErrorContains(t, old.Handshake(), "protocol version", must.Sprint("tls_min_version = tls13 on the RPC port"))

	resp, err = http.Get("http://" + a.HTTPAddr() + "/v1/agent/health")
	must.NoError(t, err)
	resp.Body.Close()
	must.Eq(t, http.StatusBadRequest, resp.StatusCode, must.Sprint("plain HTTP on the HTTPS port"))

	// The dev client's node session runs over the RPC port, so over TLS.
	testutil.WaitForResult(t, func() (bool, error) {
		it, err := a.Server().State().Nodes(nil)
		if err != nil {
			return false, err
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			n := raw.(*structs.Node)
			if n.Status == structs.NodeStatusReady && a.Server().NodeSessionOpen(n.ID) {
				must.True(t, n.TLSEnabled, must.Sprint("the node must say its agent serves HTTPS"))
				return true, nil
			}
		}
		return false, fmt.Errorf("no node with an open session yet")
	})
}
