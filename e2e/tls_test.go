package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// pki is a dev PKI made by the berth CLI itself in one directory.
type pki struct {
	dir string
	h   *Harness
}

// file is a path in the PKI directory.
func (p *pki) file(name string) string { return filepath.Join(p.dir, name) }

// berth runs the CLI in dir with env added; it returns the output and
// how the command exited.
func (p *pki) berth(dir string, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.h.Berth, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (p *pki) mustBerth(t *testing.T, dir string, args ...string) {
	t.Helper()
	out, err := p.berth(dir, nil, args...)
	must.NoError(t, err, must.Sprintf("berth %s:\n%s", strings.Join(args, " "), out))
}

// tlsBlock is the agent config's tls block for the given certificate.
func (p *pki) tlsBlock(cert string) string {
	return fmt.Sprintf(`
tls {
  http = true
  rpc  = true
  ca_file   = %s
  cert_file = %s
  key_file  = %s
  verify_server_hostname = true
  verify_https_client    = true
}
`, hclString(p.file("berth-agent-ca.pem")), hclString(p.file(cert+".pem")), hclString(p.file(cert+"-key.pem")))
}

// cliEnv points the CLI at an agent over HTTPS with the CLI certificate.
func (p *pki) cliEnv(a *Agent) []string {
	return []string{
		"BERTH_ADDR=https://" + a.HTTPAddr(),
		"BERTH_CACERT=" + p.file("berth-agent-ca.pem"),
		"BERTH_CLIENT_CERT=" + p.file("global-cli-berth.pem"),
		"BERTH_CLIENT_KEY=" + p.file("global-cli-berth-key.pem"),
	}
}

// api is an API client for a over HTTPS with the CLI certificate.
func (p *pki) api(t testing.TB, a *Agent) *api.Client {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: "https://" + a.HTTPAddr(), TLSConfig: &api.TLSConfig{
		CACert: p.file("berth-agent-ca.pem"), ClientCert: p.file("global-cli-berth.pem"), ClientKey: p.file("global-cli-berth-key.pem"),
	}})
	must.NoError(t, err)
	return c
}

// tlsConfig is a crypto/tls config presenting cert, trusting the CA.
func (p *pki) tlsConfig(t testing.TB, cert string) *tls.Config {
	t.Helper()
	caPEM, err := os.ReadFile(p.file("berth-agent-ca.pem"))
	must.NoError(t, err)
	pool := x509.NewCertPool()
	must.True(t, pool.AppendCertsFromPEM(caPEM))
	kp, err := tls.LoadX509KeyPair(p.file(cert+".pem"), p.file(cert+"-key.pem"))
	must.NoError(t, err)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{kp}, ServerName: "server.global.berth"}
}

// rpcDial opens the RPC port with TLS (byte 0x04) and cert, and announces
// proto inside. It returns the connection and the server's certificate.
func rpcDial(t testing.TB, addr string, cfg *tls.Config, proto byte) (net.Conn, *x509.Certificate) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	must.NoError(t, err)
	_, err = conn.Write([]byte{0x04})
	must.NoError(t, err)
	tc := tls.Client(conn, cfg)
	must.NoError(t, tc.Handshake())
	_, err = tc.Write([]byte{proto})
	must.NoError(t, err)
	return tc, tc.ConnectionState().PeerCertificates[0]
}

// raftTerm is the Raft term a server reports.
func raftTerm(t testing.TB, c *api.Client) string {
	t.Helper()
	self, err := c.Agent().Self()
	must.NoError(t, err)
	return self.Stats["raft"]["term"]
}

// A cluster under mutual TLS, from a PKI the berth CLI makes: 3 servers
// and a client; the CLI works with its certificate and is refused
// without one or over plain HTTP; a client agent without TLS and a client
// certificate on the Raft stream are refused, and a client certificate
// cannot be made a server; SIGHUP gives the leader a new certificate
// without an election.
func TestTLS_MutualTLSCluster(t *testing.T) {
	h := NewHarness(t)
	p := &pki{dir: h.Path("pki"), h: h}
	must.NoError(t, os.MkdirAll(p.dir, 0o700))
	p.mustBerth(t, p.dir, "tls", "ca", "create")
	for _, role := range []string{"-server", "-client", "-cli"} {
		p.mustBerth(t, p.dir, "tls", "cert", "create", role)
	}

	addrs := freeAddrs(t, 3)
	var servers []*Agent
	for i, addr := range addrs {
		name := fmt.Sprintf("s%d", i+1)
		_, port, _ := net.SplitHostPort(addr)
		a := h.newAgent(t, name, func(dataDir string) string {
			var n int
			fmt.Sscan(port, &n)
			return ServerConfig(name, dataDir, n, addrs) + p.tlsBlock("global-server-berth")
		})
		a.RPCAddr, a.IsServer = addr, true
		servers = append(servers, a)
	}
	for _, s := range servers {
		s.Start(t)
	}
	var leader *Agent
	waitFor(t, leaderTimeout, "the servers to agree on a leader over mTLS", func() (bool, error) {
		seen := map[string]bool{}
		for _, s := range servers {
			l, err := p.api(t, s).Status().Leader()
			if err != nil {
				return false, err
			}
			seen[l] = true
		}
		if len(seen) != 1 || seen[""] {
			return false, fmt.Errorf("leaders seen: %v", seen)
		}
		for _, s := range servers {
			if seen[s.RPCAddr] {
				leader = s
			}
		}
		return leader != nil, nil
	})

	c1 := h.newAgent(t, "c1", func(dataDir string) string {
		return ClientConfig("c1", dataDir, addrs) + p.tlsBlock("global-client-berth")
	})
	c1.IsClient = true
	c1.Start(t)
	// A client agent without TLS: the servers refuse its plaintext RPC.
	c2 := h.NewClient(t, "c2", addrs)
	c2.Start(t)
	waitFor(t, nodeTimeout, "c1's node to be ready (RPC and node session over mTLS)", func() (bool, error) {
		nodes, _, err := p.api(t, leader).Nodes().List(nil)
		if err != nil {
			return false, err
		}
		for _, n := range nodes {
			if n.Name == "c1" && n.Status == "ready" {
				return true, nil
			}
		}
		return false, errors.New("no ready node c1")
	})
	waitFor(t, nodeTimeout, "a server to refuse c2's plaintext rpc", func() (bool, error) {
		for _, s := range servers {
			if strings.Contains(s.LogSinceStart(), "refusing plaintext rpc connection") {
				return true, nil
			}
		}
		return false, nil
	})
	nodes, _, err := p.api(t, leader).Nodes().List(nil)
	must.NoError(t, err)
	for _, n := range nodes {
		must.NotEq(t, "c2", n.Name, must.Sprint("a client without a certificate registered"))
	}

	// The CLI with its certificate, from the environment and from flags.
	out, err := p.berth(h.Root, p.cliEnv(leader), "operator", "raft", "list-peers")
	must.NoError(t, err, must.Sprint(out))
	for _, s := range servers {
		must.StrContains(t, out, s.RPCAddr)
	}
	out, err = p.berth(h.Root, []string{"BERTH_ADDR=https://" + leader.HTTPAddr()}, "node", "status",
		"-ca-cert", p.file("berth-agent-ca.pem"), "-client-cert", p.file("global-cli-berth.pem"), "-client-key", p.file("global-cli-berth-key.pem"))
	must.NoError(t, err, must.Sprint(out))
	must.StrContains(t, out, "c1")
	// Without a certificate, and over plain HTTP: refused.
	out, err = p.berth(h.Root, []string{"BERTH_ADDR=https://" + leader.HTTPAddr(), "BERTH_CACERT=" + p.file("berth-agent-ca.pem")}, "node", "status")
	must.Error(t, err, must.Sprint(out))
	must.StrContains(t, out, "requires a client certificate")
	out, err = p.berth(h.Root, []string{"BERTH_ADDR=http://" + leader.HTTPAddr()}, "node", "status")
	must.Error(t, err, must.Sprint(out))
	must.StrContains(t, out, "The agent serves HTTPS")

	// A client certificate cannot open the Raft stream: the server
	// closes it without a word. (A server certificate's stream stays
	// open, waiting for a Raft RPC.)
	conn, _ := rpcDial(t, leader.RPCAddr, p.tlsConfig(t, "global-client-berth"), 0x02)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	must.ErrorIs(t, err, io.EOF)
	conn.Close()
	waitFor(t, leaderTimeout, "the leader to log the refused raft stream", func() (bool, error) {
		return strings.Contains(leader.LogSinceStart(), "refusing raft connection"), nil
	})

	// Nor can a server holding a client certificate join: add-peer pings
	// it and requires a server certificate.
	rogueAddr := freeAddrs(t, 1)[0]
	_, rport, _ := net.SplitHostPort(rogueAddr)
	rogue := h.newAgent(t, "rogue", func(dataDir string) string {
		var n int
		fmt.Sscan(rport, &n)
		return ServerConfig("rogue", dataDir, n, nil) + p.tlsBlock("global-client-berth")
	})
	rogue.RPCAddr, rogue.IsServer = rogueAddr, true
	rogue.Start(t)
	out, err = p.berth(h.Root, p.cliEnv(leader), "operator", "raft", "add-peer", "-address", rogueAddr)
	must.Error(t, err, must.Sprint(out))
	cfg, err := p.api(t, leader).Operator().RaftGetConfiguration(nil)
	must.NoError(t, err)
	must.Len(t, 3, cfg.Servers)

	// SIGHUP: the leader takes a new certificate for new connections and
	// stays leader in the same term.
	termBefore := raftTerm(t, p.api(t, leader))
	_, oldCert := rpcDial(t, leader.RPCAddr, p.tlsConfig(t, "global-cli-berth"), 0x01)
	newDir := h.Path("pki-new")
	must.NoError(t, os.MkdirAll(newDir, 0o700))
	p.mustBerth(t, newDir, "tls", "cert", "create", "-server", "-ca", p.file("berth-agent-ca.pem"), "-key", p.file("berth-agent-ca-key.pem"))
	for _, f := range []string{"global-server-berth.pem", "global-server-berth-key.pem"} {
		b, err := os.ReadFile(filepath.Join(newDir, f))
		must.NoError(t, err)
		// A new file moved into place, as an operator (or cert-manager) would.
		must.NoError(t, os.WriteFile(p.file(f+".new"), b, 0o600))
		must.NoError(t, os.Rename(p.file(f+".new"), p.file(f)))
	}
	must.True(t, leader.signal(syscall.SIGHUP))
	var newCert *x509.Certificate
	waitFor(t, leaderTimeout, "the leader to serve its new certificate", func() (bool, error) {
		conn, c := rpcDial(t, leader.RPCAddr, p.tlsConfig(t, "global-cli-berth"), 0x01)
		conn.Close()
		newCert = c
		return c.SerialNumber.Cmp(oldCert.SerialNumber) != 0, nil
	})
	must.StrContains(t, leader.LogSinceStart(), "Caught SIGHUP: TLS certificates reloaded")
	// New connections from the other servers, and the API, work with it.
	out, err = p.berth(h.Root, p.cliEnv(leader), "operator", "raft", "list-peers")
	must.NoError(t, err, must.Sprint(out))
	for _, s := range servers {
		l, err := p.api(t, s).Status().Leader()
		must.NoError(t, err)
		must.Eq(t, leader.RPCAddr, l, must.Sprintf("server %s sees another leader after the reload", s.Name))
	}
	must.Eq(t, termBefore, raftTerm(t, p.api(t, leader)), must.Sprint("an election happened across the reload"))
	t.Logf("leader %s: certificate serial %s -> %s, raft term %s", leader.Name, oldCert.SerialNumber, newCert.SerialNumber, termBefore)
}
