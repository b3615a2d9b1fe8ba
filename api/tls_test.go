package api

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/helper/tlsutil"
)

// An agent with verify_https_client answers a client with the CA and a
// certificate, from the environment or from Config, and refuses one
// without a certificate.
func TestClient_HTTPSWithClientCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, caKey, err := tlsutil.GenerateCA(tlsutil.CAOptions{})
	must.NoError(t, err)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		must.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	caFile := write("ca.pem", ca)
	sc, sk, err := tlsutil.GenerateCert(ca, caKey, tlsutil.CertOptions{Role: tlsutil.RoleServer})
	must.NoError(t, err)
	cc, ck, err := tlsutil.GenerateCert(ca, caKey, tlsutil.CertOptions{Role: tlsutil.RoleCLI})
	must.NoError(t, err)
	certFile, keyFile := write("cli.pem", cc), write("cli-key.pem", ck)

	srvCert, err := tls.X509KeyPair(sc, sk)
	must.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`"127.0.0.1:4647"`))
	}))
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	ts.StartTLS()
	t.Cleanup(ts.Close)

	leader := func(c *Config) error {
		cl, err := NewClient(c)
		if err != nil {
			return err
		}
		_, err = cl.Status().Leader()
		return err
	}

	t.Setenv("BERTH_ADDR", ts.URL)
	t.Setenv("NOMAD_CACERT", caFile) // the NOMAD_ name is the fallback
	t.Setenv("BERTH_CLIENT_CERT", certFile)
	t.Setenv("BERTH_CLIENT_KEY", keyFile)
	cfg := DefaultConfig()
	must.Eq(t, caFile, cfg.TLSConfig.CACert)
	must.NoError(t, leader(cfg))

	cfg = DefaultConfig()
	cfg.TLSConfig.ClientCert, cfg.TLSConfig.ClientKey = "", ""
	must.Error(t, leader(cfg), must.Sprint("no client certificate"))

	cfg = DefaultConfig()
	cfg.TLSConfig.ClientKey = ""
	must.ErrorContains(t, leader(cfg), "needs both its certificate and its key")

	t.Setenv("NOMAD_CACERT", "")
	t.Setenv("BERTH_CLIENT_CERT", "")
	t.Setenv("BERTH_CLIENT_KEY", "")
	must.Nil(t, DefaultConfig().TLSConfig)
	must.Error(t, leader(DefaultConfig()), must.Sprint("the agent's CA is not trusted"))
}
