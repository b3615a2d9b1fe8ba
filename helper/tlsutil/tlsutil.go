// Package tlsutil holds Berth's mutual TLS: the names certificates carry
// for each role, a certificate bundle that reloads on demand (SIGHUP)
// without dropping open connections, the tls.Config for each side of a
// connection, and a small PKI for development (pki.go).
//
// Roles are told apart by the DNS names in a certificate, as in Nomad:
// a server certificate names server.<region>.berth, a client agent's
// client.<region>.berth, the CLI's cli.<region>.berth. Every certificate
// must chain to the one CA in ca_file; what a peer may then do depends on
// its role (the RPC port lets only servers open Raft, for example).
//
// The standard library only, like the rest of helper.
package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// Domain ends every Berth role name.
const Domain = "berth"

// Role is what a certificate lets its holder be.
type Role string

const (
	RoleServer Role = "server"
	RoleClient Role = "client"
	RoleCLI    Role = "cli"
)

// Name is the DNS name a certificate of role r carries in region:
// "server.global.berth".
func (r Role) Name(region string) string {
	if region == "" {
		region = "global"
	}
	return string(r) + "." + region + "." + Domain
}

// Sentinel errors.
var (
	// ErrNotServer: the peer's certificate does not name
	// server.<region>.berth, so it may not act as a server.
	ErrNotServer = errors.New("peer certificate is not a server certificate")
	// ErrNoPeerCert: the peer presented no certificate.
	ErrNoPeerCert = errors.New("peer presented no certificate")
)

// Files are the PEM files of one agent: the CA that signs every
// certificate, and this agent's certificate and key; and the lowest TLS
// version its listeners and dials accept.
type Files struct {
	CAFile   string
	CertFile string
	KeyFile  string
	// MinVersion is tls.VersionTLS12 or tls.VersionTLS13 (ParseMinVersion);
	// 0 means TLS 1.2.
	MinVersion uint16
}

// minVersionNames are the values of the agent's tls_min_version, Nomad's
// spellings, with the version each means.
var minVersionNames = map[string]uint16{"tls12": tls.VersionTLS12, "tls13": tls.VersionTLS13}

// ParseMinVersion maps tls_min_version ("tls12", "tls13"; "" is tls12) to
// its TLS version. Nomad also takes tls10 and tls11; Berth refuses them:
// both are deprecated (RFC 8996) and nothing Berth talks to needs them.
func ParseMinVersion(s string) (uint16, error) {
	if s == "" {
		return tls.VersionTLS12, nil
	}
	if v, ok := minVersionNames[s]; ok {
		return v, nil
	}
	if s == "tls10" || s == "tls11" {
		return 0, fmt.Errorf("tls_min_version %q is refused: TLS 1.0 and 1.1 are deprecated (RFC 8996); use \"tls12\" (the default) or \"tls13\"", s)
	}
	return 0, fmt.Errorf("tls_min_version %q is not a TLS version: use \"tls12\" (the default) or \"tls13\"", s)
}

// minVersion is f's MinVersion with the default applied.
func (f Files) minVersion() uint16 {
	if f.MinVersion == 0 {
		return tls.VersionTLS12
	}
	return f.MinVersion
}

// bundle is one loaded generation of Files; never changed once loaded.
type bundle struct {
	cert *tls.Certificate
	leaf *x509.Certificate
	pool *x509.CertPool
}

func loadBundle(f Files) (*bundle, error) {
	if v := f.MinVersion; v != 0 && v != tls.VersionTLS12 && v != tls.VersionTLS13 {
		return nil, fmt.Errorf("tls: minimum version %#04x is neither TLS 1.2 nor TLS 1.3", v)
	}
	if f.CAFile == "" || f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("tls: ca_file, cert_file and key_file are all required")
	}
	caPEM, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, fmt.Errorf("tls: reading ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("tls: ca_file %s holds no PEM certificate", f.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: loading cert_file %s with key_file %s: %w", f.CertFile, f.KeyFile, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("tls: parsing cert_file %s: %w", f.CertFile, err)
	}
	cert.Leaf = leaf
	// A certificate from another CA would fail every handshake later,
	// far from its cause: refuse it here.
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("tls: cert_file %s is not signed by ca_file %s: %w", f.CertFile, f.CAFile, err)
	}
	return &bundle{cert: &cert, leaf: leaf, pool: pool}, nil
}

// Reloader holds the agent's current certificate and CA. Every new
// connection reads the current generation; Reload swaps in a new one
// atomically, so open connections (Raft among them) carry on untouched.
// Safe for concurrent use.
type Reloader struct {
	files Files
	cur   atomic.Pointer[bundle]
}

// NewReloader loads files once; an error names the file at fault.
func NewReloader(files Files) (*Reloader, error) {
	b, err := loadBundle(files)
	if err != nil {
		return nil, err
	}
	r := &Reloader{files: files}
	r.cur.Store(b)
	return r, nil
}

// Reload reads the files again. On error the current generation stays.
func (r *Reloader) Reload() error {
	b, err := loadBundle(r.files)
	if err != nil {
		return err
	}
	r.cur.Store(b)
	return nil
}

// Leaf is the current certificate.
func (r *Reloader) Leaf() *x509.Certificate { return r.cur.Load().leaf }

// HasRole reports whether the current certificate names role in region.
func (r *Reloader) HasRole(role Role, region string) bool {
	return r.Leaf().VerifyHostname(role.Name(region)) == nil
}

// IncomingConfig is the config for the accepting side. auth says whether
// peers must present a certificate signed by the CA. Each handshake
// takes the current generation.
func (r *Reloader) IncomingConfig(auth tls.ClientAuthType) *tls.Config {
	// Both configs carry the minimum: crypto/tls takes the version from
	// the one GetConfigForClient returns.
	minVer := r.files.minVersion()
	return &tls.Config{
		MinVersion: minVer,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			b := r.cur.Load()
			return &tls.Config{
				MinVersion:   minVer,
				Certificates: []tls.Certificate{*b.cert},
				ClientCAs:    b.pool,
				ClientAuth:   auth,
			}, nil
		},
	}
}

// OutgoingConfig is the config for one dial, from the current
// generation. With serverName set, the peer must hold a certificate for
// that name (server.<region>.berth); without, any certificate the CA
// signed will do (verify_server_hostname = false).
func (r *Reloader) OutgoingConfig(serverName string) *tls.Config {
	b := r.cur.Load()
	cfg := &tls.Config{
		MinVersion:   r.files.minVersion(),
		RootCAs:      b.pool,
		Certificates: []tls.Certificate{*b.cert},
		ServerName:   serverName,
	}
	if serverName == "" {
		// crypto/tls checks the name unless told not to; the chain is
		// then checked here instead.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			return verifyChain(cs, b.pool)
		}
	}
	return cfg
}

func verifyChain(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return ErrNoPeerCert
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
	return err
}

// PeerRole reports whether the verified peer of cs holds role in region.
// Call it after a handshake that verified the chain.
func PeerRole(cs tls.ConnectionState, role Role, region string) error {
	if len(cs.PeerCertificates) == 0 {
		return ErrNoPeerCert
	}
	leaf := cs.PeerCertificates[0]
	if err := leaf.VerifyHostname(role.Name(region)); err != nil {
		if role == RoleServer {
			return fmt.Errorf("%w: it names %v, not %s", ErrNotServer, leaf.DNSNames, role.Name(region))
		}
		return fmt.Errorf("peer certificate names %v, not %s", leaf.DNSNames, role.Name(region))
	}
	return nil
}

// pemBlock encodes one PEM block.
func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
