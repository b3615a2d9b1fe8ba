package tlsutil

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// A development PKI: one CA, and certificates for servers, clients and
// the CLI signed by it. Keys are ECDSA P-256. Production clusters may use
// any CA; only the role names matter to Berth.

// CAOptions shape a new CA.
type CAOptions struct {
	// Days the CA is valid; 0 means 5 years.
	Days int
	// CommonName of the CA; empty picks "Berth Agent CA <serial>".
	CommonName string
}

// GenerateCA makes a self-signed CA; it returns the certificate and key
// as PEM.
func GenerateCA(opts CAOptions) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating ca key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	days := opts.Days
	if days <= 0 {
		days = 5 * 365
	}
	cn := opts.CommonName
	if cn == "" {
		cn = fmt.Sprintf("Berth Agent CA %x", serial.Bytes()[:8])
	}
	skid, err := keyID(key.Public())
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"Berth"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.AddDate(0, 0, days),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		SubjectKeyId:          skid,
		AuthorityKeyId:        skid,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing ca: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding ca key: %w", err)
	}
	return pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", keyDER), nil
}

// CertOptions shape a certificate signed by the CA.
type CertOptions struct {
	Role   Role
	Region string // empty means "global"
	// Days the certificate is valid; 0 means 1 year.
	Days int
	// DNSNames and IPs are added to the role's own names.
	DNSNames []string
	IPs      []net.IP
}

// GenerateCert makes a certificate for opts.Role signed by the CA given
// as PEM. Servers and clients name their role, localhost and 127.0.0.1
// (so agents on one machine and the local CLI can reach them); the CLI
// names its role and localhost.
func GenerateCert(caCertPEM, caKeyPEM []byte, opts CertOptions) (certPEM, keyPEM []byte, err error) {
	ca, caKey, err := parseCA(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, nil, err
	}
	var usage []x509.ExtKeyUsage
	dns := []string{opts.Role.Name(opts.Region), "localhost"}
	var ips []net.IP
	switch opts.Role {
	case RoleServer, RoleClient:
		// Both serve (RPC, HTTPS) and dial (Raft, forwarding, node sessions).
		usage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		ips = append(ips, net.IPv4(127, 0, 0, 1))
	case RoleCLI:
		usage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	default:
		return nil, nil, fmt.Errorf("unknown certificate role %q: use server, client or cli", opts.Role)
	}
	dns = append(dns, opts.DNSNames...)
	ips = append(ips, opts.IPs...)

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	skid, err := keyID(key.Public())
	if err != nil {
		return nil, nil, err
	}
	days := opts.Days
	if days <= 0 {
		days = 365
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: opts.Role.Name(opts.Region)},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.AddDate(0, 0, days),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           usage,
		BasicConstraintsValid: true,
		DNSNames:              dns,
		IPAddresses:           ips,
		SubjectKeyId:          skid,
		AuthorityKeyId:        ca.SubjectKeyId,
	}
	if ca.NotAfter.Before(tmpl.NotAfter) {
		tmpl.NotAfter = ca.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing %s certificate: %w", opts.Role, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding key: %w", err)
	}
	return pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", keyDER), nil
}

func parseCA(certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, nil, errors.New("ca certificate: no PEM CERTIFICATE block")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("ca certificate: %w", err)
	}
	if !ca.IsCA {
		return nil, nil, errors.New("ca certificate: not a CA (basic constraints say so)")
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, nil, errors.New("ca key: no PEM block")
	}
	var key any
	switch kb.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(kb.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(kb.Bytes)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("ca key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("ca key: not a signing key")
	}
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(ca.PublicKey) {
		return nil, nil, errors.New("ca key does not belong to the ca certificate")
	}
	return ca, signer, nil
}

func newSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	return s, nil
}

// keyID is the SHA-256 of the public key, cut to 20 bytes (RFC 7093).
func keyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encoding public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return sum[:20], nil
}
