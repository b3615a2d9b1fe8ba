package command

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"

	"github.com/berth-io/berth/helper/tlsutil"
)

func init() {
	register("tls", func(ui *UI) Command { return &TLSCommand{ui: ui} })
	register("tls ca create", func(ui *UI) Command { return &TLSCACreateCommand{ui: ui} })
	register("tls cert create", func(ui *UI) Command { return &TLSCertCreateCommand{ui: ui} })
}

// The dev PKI's file names, as Nomad names them with "berth" for
// "nomad": the CA, then <region>-<role>-berth.pem per certificate.
const (
	tlsCAFile    = "berth-agent-ca.pem"
	tlsCAKeyFile = "berth-agent-ca-key.pem"
)

// TLSCommand only shows help for its subcommands.
type TLSCommand struct{ ui *UI }

func (c *TLSCommand) Synopsis() string { return "Create a development PKI for mutual TLS" }

func (c *TLSCommand) Help() string {
	return `
Usage: berth tls <subcommand> [options]

  Creates a certificate authority and certificates for Berth's mutual TLS,
  in the current directory, with no external tools:

    berth tls ca create
    berth tls cert create -server -region global
    berth tls cert create -client
    berth tls cert create -cli

  Then set tls { http = true, rpc = true, ca_file, cert_file, key_file }
  in each agent's config. Servers need server.<region>.berth certificates,
  clients client.<region>.berth.

Subcommands:

  ca create      Create a certificate authority
  cert create    Create a certificate signed by that authority
`
}

func (c *TLSCommand) Run(args []string) int {
	c.ui.Error("%s", c.Help())
	return 1
}

// TLSCACreateCommand is `berth tls ca create`.
type TLSCACreateCommand struct{ ui *UI }

func (c *TLSCACreateCommand) Synopsis() string { return "Create a certificate authority" }

func (c *TLSCACreateCommand) Help() string {
	return `
Usage: berth tls ca create [options]

  Creates a certificate authority for a development PKI and writes
  ` + tlsCAFile + ` and ` + tlsCAKeyFile + ` in the current directory.
  Existing files are never overwritten.

Options:

  -days=<n>
    How long the CA is valid. Defaults to 1825 (5 years).

  -common-name=<name>
    The CA's common name. Defaults to "Berth Agent CA <id>".
`
}

func (c *TLSCACreateCommand) Run(args []string) int {
	fs := flag.NewFlagSet("tls ca create", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	days := fs.Int("days", 1825, "")
	cn := fs.String("common-name", "", "")
	if err := parseArgs(fs, args); err != nil {
		c.ui.Error("Error parsing flags: %v\nRun 'berth tls ca create -help' for usage.", err)
		return 1
	}
	if fs.NArg() > 0 {
		c.ui.Error("Unexpected arguments %q: berth tls ca create takes only flags.", fs.Args())
		return 1
	}
	if *days <= 0 {
		c.ui.Error("-days=%d must be positive.", *days)
		return 1
	}
	if err := refuseExisting(tlsCAFile, tlsCAKeyFile); err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	cert, key, err := tlsutil.GenerateCA(tlsutil.CAOptions{Days: *days, CommonName: *cn})
	if err != nil {
		c.ui.Error("Error creating the CA: %v", err)
		return 1
	}
	if err := writePair(tlsCAFile, cert, tlsCAKeyFile, key); err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	c.ui.Output("==> CA certificate saved to: %s", tlsCAFile)
	c.ui.Output("==> CA certificate key saved to: %s", tlsCAKeyFile)
	return 0
}

// TLSCertCreateCommand is `berth tls cert create`.
type TLSCertCreateCommand struct{ ui *UI }

func (c *TLSCertCreateCommand) Synopsis() string {
	return "Create a server, client or CLI certificate"
}

func (c *TLSCertCreateCommand) Help() string {
	return `
Usage: berth tls cert create -server|-client|-cli [options]

  Creates a certificate signed by the CA in the current directory and
  writes <region>-<role>-berth.pem and <region>-<role>-berth-key.pem.
  Server certificates name server.<region>.berth, client certificates
  client.<region>.berth (both also localhost and 127.0.0.1), CLI
  certificates cli.<region>.berth and localhost. Existing files are never
  overwritten.

Options:

  -server, -client, -cli
    The certificate's role; exactly one is required.

  -region=<region>
    The region the certificate is for. Defaults to "global".

  -additional-dnsname=<name>
    Another DNS name for the certificate. May be given more than once.

  -additional-ipaddress=<ip>
    Another IP address for the certificate. May be given more than once.

  -days=<n>
    How long the certificate is valid. Defaults to 365.

  -ca=<path>
    The CA certificate. Defaults to ` + tlsCAFile + `.

  -key=<path>
    The CA key. Defaults to ` + tlsCAKeyFile + `.
`
}

func (c *TLSCertCreateCommand) Run(args []string) int {
	fs := flag.NewFlagSet("tls cert create", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		server, client, cli bool
		dnsNames, ipAddrs   stringList
	)
	fs.BoolVar(&server, "server", false, "")
	fs.BoolVar(&client, "client", false, "")
	fs.BoolVar(&cli, "cli", false, "")
	region := fs.String("region", "global", "")
	days := fs.Int("days", 365, "")
	caPath := fs.String("ca", tlsCAFile, "")
	keyPath := fs.String("key", tlsCAKeyFile, "")
	fs.Var(&dnsNames, "additional-dnsname", "")
	fs.Var(&ipAddrs, "additional-ipaddress", "")
	if err := parseArgs(fs, args); err != nil {
		c.ui.Error("Error parsing flags: %v\nRun 'berth tls cert create -help' for usage.", err)
		return 1
	}
	if fs.NArg() > 0 {
		c.ui.Error("Unexpected arguments %q: berth tls cert create takes only flags.", fs.Args())
		return 1
	}
	var roles []tlsutil.Role
	for role, on := range map[tlsutil.Role]bool{tlsutil.RoleServer: server, tlsutil.RoleClient: client, tlsutil.RoleCLI: cli} {
		if on {
			roles = append(roles, role)
		}
	}
	if len(roles) != 1 {
		c.ui.Error("Exactly one of -server, -client or -cli is required.")
		return 1
	}
	role := roles[0]
	if *region == "" {
		c.ui.Error("-region must not be empty.")
		return 1
	}
	if *days <= 0 {
		c.ui.Error("-days=%d must be positive.", *days)
		return 1
	}
	var ips []net.IP
	for _, s := range ipAddrs {
		ip := net.ParseIP(s)
		if ip == nil {
			c.ui.Error("-additional-ipaddress=%q is not an IP address.", s)
			return 1
		}
		ips = append(ips, ip)
	}
	caPEM, err := os.ReadFile(*caPath)
	if err != nil {
		c.ui.Error("Error reading the CA certificate: %v\nRun 'berth tls ca create' first, or point -ca at it.", err)
		return 1
	}
	caKey, err := os.ReadFile(*keyPath)
	if err != nil {
		c.ui.Error("Error reading the CA key: %v\nRun 'berth tls ca create' first, or point -key at it.", err)
		return 1
	}
	base := fmt.Sprintf("%s-%s-%s", *region, role, tlsutil.Domain)
	certFile, keyFile := base+".pem", base+"-key.pem"
	if err := refuseExisting(certFile, keyFile); err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	cert, key, err := tlsutil.GenerateCert(caPEM, caKey, tlsutil.CertOptions{
		Role: role, Region: *region, Days: *days, DNSNames: dnsNames, IPs: ips,
	})
	if err != nil {
		c.ui.Error("Error creating the %s certificate: %v", role, err)
		return 1
	}
	if err := writePair(certFile, cert, keyFile, key); err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	c.ui.Output("==> Using CA file %s and CA key %s", *caPath, *keyPath)
	c.ui.Output("==> %s certificate for %s saved to: %s", role, role.Name(*region), certFile)
	c.ui.Output("==> %s certificate key saved to: %s", role, keyFile)
	return 0
}

// refuseExisting fails when any of files exists: a PKI is never
// overwritten, since every certificate signed by an old CA would stop
// working.
func refuseExisting(files ...string) error {
	for _, f := range files {
		_, err := os.Stat(f)
		if err == nil {
			return fmt.Errorf("%s already exists: move it away or create the files in another directory; berth never overwrites a key or certificate", f)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("checking %s: %w", f, err)
		}
	}
	return nil
}

// writePair writes a certificate (0644) and its key (0600), each only if
// it does not exist yet.
func writePair(certFile string, cert []byte, keyFile string, key []byte) error {
	if err := writeNew(keyFile, key, 0o600); err != nil {
		return err
	}
	if err := writeNew(certFile, cert, 0o644); err != nil {
		os.Remove(keyFile)
		return err
	}
	return nil
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
