package tlsutil

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// pki writes a CA and one certificate per role into a temp dir.
type pki struct {
	dir          string
	caPEM, caKey []byte
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	c, k, err := GenerateCA(CAOptions{})
	must.NoError(t, err)
	return &pki{dir: t.TempDir(), caPEM: c, caKey: k}
}

func (p *pki) files(t *testing.T, name string, opts CertOptions) Files {
	t.Helper()
	c, k, err := GenerateCert(p.caPEM, p.caKey, opts)
	must.NoError(t, err)
	f := Files{
		CAFile:   filepath.Join(p.dir, "ca.pem"),
		CertFile: filepath.Join(p.dir, name+".pem"),
		KeyFile:  filepath.Join(p.dir, name+"-key.pem"),
	}
	must.NoError(t, os.WriteFile(f.CAFile, p.caPEM, 0o600))
	must.NoError(t, os.WriteFile(f.CertFile, c, 0o600))
	must.NoError(t, os.WriteFile(f.KeyFile, k, 0o600))
	return f
}

// handshake runs one TLS handshake over loopback TCP (kernel buffers, so
// neither side blocks on an alert the other never reads) and returns both
// sides' errors and the state the accepting side saw.
func handshake(t *testing.T, srv, cli *tls.Config) (srvErr, cliErr error, st tls.ConnectionState) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		tc := tls.Client(c, cli)
		err = tc.Handshake()
		if err == nil {
			// TLS 1.3 clients finish first; the server's verdict on the
			// client certificate arrives with the first read.
			tc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			if _, rerr := tc.Read(make([]byte, 1)); rerr != nil && !isTimeout(rerr) {
				err = rerr
			}
		}
		done <- err
	}()
	a, err := ln.Accept()
	must.NoError(t, err)
	defer a.Close()
	s := tls.Server(a, srv)
	srvErr = s.Handshake()
	cliErr = <-done
	return srvErr, cliErr, s.ConnectionState()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestRoleNames(t *testing.T) {
	p := newPKI(t)
	cases := []struct {
		name   string
		opts   CertOptions
		dns    []string
		ips    int
		isSrv  bool
		usages int
	}{
		{name: "server", opts: CertOptions{Role: RoleServer}, dns: []string{"server.global.berth", "localhost"}, ips: 1, isSrv: true, usages: 2},
		{name: "client in eu", opts: CertOptions{Role: RoleClient, Region: "eu"}, dns: []string{"client.eu.berth", "localhost"}, ips: 1, usages: 2},
		{name: "cli", opts: CertOptions{Role: RoleCLI}, dns: []string{"cli.global.berth", "localhost"}, usages: 1},
		{name: "extra names", opts: CertOptions{Role: RoleServer, DNSNames: []string{"s1.example"}, IPs: []net.IP{net.ParseIP("10.0.0.1")}},
			dns: []string{"server.global.berth", "localhost", "s1.example"}, ips: 2, isSrv: true, usages: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewReloader(p.files(t, "c", tc.opts))
			must.NoError(t, err)
			must.Eq(t, tc.dns, r.Leaf().DNSNames)
			must.Len(t, tc.ips, r.Leaf().IPAddresses)
			must.Len(t, tc.usages, r.Leaf().ExtKeyUsage)
			must.Eq(t, tc.isSrv, r.HasRole(RoleServer, "global"))
		})
	}
	_, _, err := GenerateCert(p.caPEM, p.caKey, CertOptions{Role: "admin"})
	must.ErrorContains(t, err, `unknown certificate role "admin"`)
}

func TestLoadRefusesForeignCert(t *testing.T) {
	p, other := newPKI(t), newPKI(t)
	f := p.files(t, "srv", CertOptions{Role: RoleServer})
	// A CA file from another PKI next to p's certificate.
	must.NoError(t, os.WriteFile(f.CAFile, other.caPEM, 0o600))
	_, err := NewReloader(f)
	must.ErrorContains(t, err, "is not signed by ca_file")

	_, err = NewReloader(Files{CAFile: f.CAFile})
	must.ErrorContains(t, err, "ca_file, cert_file and key_file are all required")

	// The CA key must match the CA certificate.
	_, _, err = GenerateCert(p.caPEM, other.caKey, CertOptions{Role: RoleServer})
	must.ErrorContains(t, err, "ca key does not belong to the ca certificate")
}

func TestHandshakeRoles(t *testing.T) {
	p := newPKI(t)
	srv, err := NewReloader(p.files(t, "srv", CertOptions{Role: RoleServer}))
	must.NoError(t, err)
	cli, err := NewReloader(p.files(t, "cli", CertOptions{Role: RoleClient}))
	must.NoError(t, err)
	foreign := newPKI(t)
	rogue, err := NewReloader(foreign.files(t, "rogue", CertOptions{Role: RoleServer}))
	must.NoError(t, err)

	t.Run("client to server, hostname verified", func(t *testing.T) {
		se, ce, st := handshake(t, srv.IncomingConfig(tls.RequireAndVerifyClientCert), cli.OutgoingConfig(RoleServer.Name("global")))
		must.NoError(t, se)
		must.NoError(t, ce)
		must.ErrorIs(t, PeerRole(st, RoleServer, "global"), ErrNotServer)
		must.NoError(t, PeerRole(st, RoleClient, "global"))
	})
	t.Run("server to server", func(t *testing.T) {
		se, ce, st := handshake(t, srv.IncomingConfig(tls.RequireAndVerifyClientCert), srv.OutgoingConfig(RoleServer.Name("global")))
		must.NoError(t, se)
		must.NoError(t, ce)
		must.NoError(t, PeerRole(st, RoleServer, "global"))
		must.ErrorIs(t, PeerRole(st, RoleServer, "eu"), ErrNotServer)
	})
	t.Run("a client cert cannot pass for a server", func(t *testing.T) {
		_, ce, _ := handshake(t, cli.IncomingConfig(tls.RequireAndVerifyClientCert), srv.OutgoingConfig(RoleServer.Name("global")))
		must.Error(t, ce)
	})
	t.Run("without hostname check any CA-signed cert serves", func(t *testing.T) {
		_, ce, _ := handshake(t, cli.IncomingConfig(tls.RequireAndVerifyClientCert), srv.OutgoingConfig(""))
		must.NoError(t, ce)
	})
	t.Run("without hostname check a foreign CA still fails", func(t *testing.T) {
		_, ce, _ := handshake(t, rogue.IncomingConfig(tls.NoClientCert), srv.OutgoingConfig(""))
		must.Error(t, ce)
	})
	t.Run("no client certificate", func(t *testing.T) {
		se, _, _ := handshake(t, srv.IncomingConfig(tls.RequireAndVerifyClientCert), &tls.Config{RootCAs: srv.cur.Load().pool, ServerName: "localhost"})
		must.Error(t, se)
	})
	t.Run("foreign client certificate", func(t *testing.T) {
		se, _, _ := handshake(t, srv.IncomingConfig(tls.RequireAndVerifyClientCert), rogue.OutgoingConfig(""))
		must.Error(t, se)
	})
}

func TestReloadSwapsForNewConnections(t *testing.T) {
	p := newPKI(t)
	f := p.files(t, "srv", CertOptions{Role: RoleServer})
	srv, err := NewReloader(f)
	must.NoError(t, err)
	cli, err := NewReloader(p.files(t, "cli", CertOptions{Role: RoleClient}))
	must.NoError(t, err)
	in := srv.IncomingConfig(tls.RequireAndVerifyClientCert)

	serial := func() string {
		var got string
		cfg := cli.OutgoingConfig(RoleServer.Name("global"))
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			got = cs.PeerCertificates[0].SerialNumber.String()
			return nil
		}
		_, ce, _ := handshake(t, in, cfg)
		must.NoError(t, ce)
		return got
	}
	before := serial()
	must.Eq(t, srv.Leaf().SerialNumber.String(), before)

	// A broken file leaves the current generation in place.
	must.NoError(t, os.WriteFile(f.CertFile, []byte("garbage"), 0o600))
	must.Error(t, srv.Reload())
	must.Eq(t, before, serial())

	c, k, err := GenerateCert(p.caPEM, p.caKey, CertOptions{Role: RoleServer})
	must.NoError(t, err)
	must.NoError(t, os.WriteFile(f.CertFile, c, 0o600))
	must.NoError(t, os.WriteFile(f.KeyFile, k, 0o600))
	must.NoError(t, srv.Reload())
	after := serial()
	must.NotEq(t, before, after)
	must.Eq(t, srv.Leaf().SerialNumber.String(), after)
}

func TestPeerRoleWithoutCert(t *testing.T) {
	must.True(t, errors.Is(PeerRole(tls.ConnectionState{}, RoleServer, "global"), ErrNoPeerCert))
}

// tls_min_version = "tls13" holds on both sides: a listener refuses a
// peer that offers only TLS 1.2, and so does a dial; the default (tls12)
// still speaks to it.
func TestMinVersion(t *testing.T) {
	p := newPKI(t)
	srvFiles := p.files(t, "srv", CertOptions{Role: RoleServer})
	def, err := NewReloader(srvFiles)
	must.NoError(t, err)
	v13 := srvFiles
	v13.MinVersion, err = ParseMinVersion("tls13")
	must.NoError(t, err)
	strict, err := NewReloader(v13)
	must.NoError(t, err)
	name := RoleServer.Name("global")
	capped := func(c *tls.Config) *tls.Config { c.MaxVersion = tls.VersionTLS12; return c }

	se, ce, st := handshake(t, def.IncomingConfig(tls.RequireAndVerifyClientCert), capped(def.OutgoingConfig(name)))
	must.NoError(t, se)
	must.NoError(t, ce)
	must.Eq(t, tls.VersionTLS12, st.Version, must.Sprint("the default minimum, tls12, takes a TLS 1.2 peer"))

	se, _, _ = handshake(t, strict.IncomingConfig(tls.RequireAndVerifyClientCert), capped(def.OutgoingConfig(name)))
	must.ErrorContains(t, se, "unsupported versions", must.Sprint("a tls13 listener must refuse a TLS 1.2 dial"))

	// GetConfigForClient's config decides the version: cap that one.
	b := def.cur.Load()
	old := &tls.Config{MaxVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*b.cert}, ClientCAs: b.pool, ClientAuth: tls.RequireAndVerifyClientCert}
	se, ce, _ = handshake(t, old, def.OutgoingConfig(name))
	must.NoError(t, se)
	must.NoError(t, ce, must.Sprint("the default dial takes a TLS 1.2 listener"))
	_, ce, _ = handshake(t, old, strict.OutgoingConfig(name))
	must.ErrorContains(t, ce, "protocol version", must.Sprint("a tls13 dial must refuse a TLS 1.2 listener"))

	se, ce, st = handshake(t, strict.IncomingConfig(tls.RequireAndVerifyClientCert), strict.OutgoingConfig(name))
	must.NoError(t, se)
	must.NoError(t, ce)
	must.Eq(t, tls.VersionTLS13, st.Version)

	for in, want := range map[string]string{
		"tls11": "TLS 1.0 and 1.1 are deprecated",
		"TLS13": `tls_min_version "TLS13" is not a TLS version: use "tls12" (the default) or "tls13"`,
		"1.3":   "is not a TLS version",
	} {
		_, err := ParseMinVersion(in)
		must.ErrorContains(t, err, want)
	}
	v, err := ParseMinVersion("")
	must.NoError(t, err)
	must.Eq(t, tls.VersionTLS12, v)
}
