package nomad_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/helper/tlsutil"
	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
	"github.com/berth-io/berth/testutil/cluster"
)

// testPKI writes a CA and certificates for each role into a temp dir.
type testPKI struct {
	dir       string
	ca, caKey []byte
	reloaders map[string]*tlsutil.Reloader
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	ca, key, err := tlsutil.GenerateCA(tlsutil.CAOptions{})
	must.NoError(t, err)
	p := &testPKI{dir: t.TempDir(), ca: ca, caKey: key, reloaders: map[string]*tlsutil.Reloader{}}
	must.NoError(t, os.WriteFile(filepath.Join(p.dir, "ca.pem"), ca, 0o600))
	return p
}

func (p *testPKI) reloader(t *testing.T, name string, role tlsutil.Role) *tlsutil.Reloader {
	t.Helper()
	c, k, err := tlsutil.GenerateCert(p.ca, p.caKey, tlsutil.CertOptions{Role: role})
	must.NoError(t, err)
	f := tlsutil.Files{CAFile: filepath.Join(p.dir, "ca.pem"), CertFile: filepath.Join(p.dir, name+".pem"), KeyFile: filepath.Join(p.dir, name+"-key.pem")}
	must.NoError(t, os.WriteFile(f.CertFile, c, 0o600))
	must.NoError(t, os.WriteFile(f.KeyFile, k, 0o600))
	r, err := tlsutil.NewReloader(f)
	must.NoError(t, err)
	return r
}

func tlsCluster(t *testing.T, p *testPKI) []*cluster.Server {
	return cluster.NewCluster(t, 3, func(i int, c *nomad.Config) {
		c.TLS = p.reloader(t, c.NodeName, tlsutil.RoleServer)
	})
}

// Raft, forwarding and joining run over mutual TLS; the port refuses
// plaintext and callers without a certificate of the CA.
func TestRPCTLS_ClusterOverMutualTLS(t *testing.T) {
	p := newTestPKI(t)
	servers := tlsCluster(t, p)
	leader := cluster.WaitForLeader(t, servers...)
	// A write through a follower is forwarded to the leader over TLS and
	// replicated to every server over Raft on TLS.
	// (Retried: under load the short test timings can lose a leader.)
	follower := followers(servers, leader)[0]
	testutil.WaitForResult(t, func() (bool, error) {
		err := follower.RPC("Node.Register", &structs.NodeRegisterRequest{Node: testNode(1)}, &structs.NodeUpdateResponse{})
		return err == nil, err
	})
	waitForNode(t, 1, servers...)

	ctx := context.Background()
	ping := func(pool *nomad.ConnPool) error {
		t.Cleanup(pool.Close)
		return pool.RPC(ctx, leader.Addr, "Status.Ping", &structs.GenericRequest{}, &structs.PingResponse{})
	}
	client := p.reloader(t, "client", tlsutil.RoleClient)
	must.NoError(t, ping(nomad.NewConnPool(5*time.Second).WithTLS(func() *tls.Config {
		return client.OutgoingConfig(tlsutil.RoleServer.Name("global"))
	})))
	must.Error(t, ping(nomad.NewConnPool(5*time.Second)), must.Sprint("plaintext must be refused"))
	must.Error(t, ping(nomad.NewConnPool(5*time.Second).WithTLS(func() *tls.Config {
		cfg := client.OutgoingConfig("")
		cfg.Certificates = nil
		return cfg
	})), must.Sprint("a caller without a certificate must be refused"))
	foreign := newTestPKI(t).reloader(t, "rogue", tlsutil.RoleServer)
	must.Error(t, ping(nomad.NewConnPool(5*time.Second).WithTLS(func() *tls.Config {
		cfg := foreign.OutgoingConfig("")
		cfg.VerifyConnection = nil // trust the server blindly: the server must still refuse
		return cfg
	})), must.Sprint("a certificate of another CA must be refused"))
}

// tlsStream dials Raft over the RPC port like a server would, with any
// certificate: the test's side of raft.NetworkTransport.
type tlsStream struct{ cfg func() *tls.Config }

func (s *tlsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	conn.Write([]byte{0x04}) // rpcByteTLS
	tc := tls.Client(conn, s.cfg())
	if err := tc.Handshake(); err != nil {
		conn.Close()
		return nil, err
	}
	tc.Write([]byte{0x02}) // rpcByteRaft
	return tc, nil
}
func (s *tlsStream) Accept() (net.Conn, error) { select {} }
func (s *tlsStream) Close() error              { return nil }
func (s *tlsStream) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

// Only a server certificate opens the Raft stream. A server certificate
// reaches Raft (whose guard then answers that this ID is no member); a
// client certificate never gets that far: the connection is closed
// without an answer.
func TestRPCTLS_RaftTakesOnlyServerCertificates(t *testing.T) {
	p := newTestPKI(t)
	servers := tlsCluster(t, p)
	leader := cluster.WaitForLeader(t, servers...)

	vote := func(r *tlsutil.Reloader) error {
		trans := raft.NewNetworkTransport(&tlsStream{cfg: func() *tls.Config {
			return r.OutgoingConfig(tlsutil.RoleServer.Name("global"))
		}}, 1, 5*time.Second, nil)
		defer trans.Close()
		var resp raft.RequestVoteResponse
		return trans.RequestVote(raft.ServerID(leader.ID()), raft.ServerAddress(leader.Addr), &raft.RequestVoteRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte("127.0.0.1:1")},
			Term:      1 << 40,
		}, &resp)
	}
	err := vote(p.reloader(t, "server-x", tlsutil.RoleServer))
	must.ErrorContains(t, err, "not a server in this cluster's configuration")

	err = vote(p.reloader(t, "client-x", tlsutil.RoleClient))
	must.Error(t, err)
	must.StrNotContains(t, err.Error(), "configuration", must.Sprint("the raft guard must never see a client certificate's rpc"))
	// The forged term reached no server's Raft.
	for _, s := range servers {
		must.NotEq(t, fmt.Sprint(uint64(1<<40)), s.Raft().Stats()["term"])
	}

	// Nor can a client certificate be added as a voter: the leader's
	// ping checks that the peer holds a server certificate.
	rogueLn, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	rogue, err := nomad.NewServer(func() *nomad.Config {
		c := cluster.TestConfig(t, "rogue")
		c.RPCListener = rogueLn
		c.TLS = p.reloader(t, "rogue", tlsutil.RoleClient)
		return c
	}())
	must.NoError(t, err)
	t.Cleanup(func() { rogue.Shutdown() })
	// (Retried while the short test timings lose a leader under load.)
	testutil.WaitForResult(t, func() (bool, error) {
		err = leader.RPC("Operator.RaftAddPeer", &structs.RaftPeerRequest{Address: rogue.RPCAddr(), ID: rogue.ID()}, &structs.GenericResponse{})
		return !errors.Is(err, structs.ErrNoLeader), err
	})
	must.ErrorContains(t, err, "no Berth server answers at "+rogue.RPCAddr())
	f := leader.Raft().GetConfiguration()
	must.NoError(t, f.Error())
	must.Len(t, 3, f.Configuration().Servers)
}

// BenchmarkRPCPing compares one Status.Ping over a pooled connection
// with and without mutual TLS, and the cost of a new TLS connection (TCP,
// the handshake with both certificates verified, one ping).
func BenchmarkRPCPing(b *testing.B) {
	p := &testPKI{reloaders: map[string]*tlsutil.Reloader{}}
	ca, key, err := tlsutil.GenerateCA(tlsutil.CAOptions{})
	if err != nil {
		b.Fatal(err)
	}
	p.dir, p.ca, p.caKey = b.TempDir(), ca, key
	if err := os.WriteFile(filepath.Join(p.dir, "ca.pem"), ca, 0o600); err != nil {
		b.Fatal(err)
	}
	rel := func(name string, role tlsutil.Role) *tlsutil.Reloader {
		c, k, err := tlsutil.GenerateCert(ca, key, tlsutil.CertOptions{Role: role})
		if err != nil {
			b.Fatal(err)
		}
		f := tlsutil.Files{CAFile: filepath.Join(p.dir, "ca.pem"), CertFile: filepath.Join(p.dir, name+".pem"), KeyFile: filepath.Join(p.dir, name+"-key.pem")}
		os.WriteFile(f.CertFile, c, 0o600)
		os.WriteFile(f.KeyFile, k, 0o600)
		r, err := tlsutil.NewReloader(f)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	plain := cluster.NewServer(b, nil)
	srvCert := rel("server", tlsutil.RoleServer)
	secure := cluster.NewServer(b, func(c *nomad.Config) { c.TLS = srvCert })
	client := rel("client", tlsutil.RoleClient)
	clientTLS := func() *tls.Config { return client.OutgoingConfig(tlsutil.RoleServer.Name("global")) }
	ctx := context.Background()
	ping := func(b *testing.B, pool *nomad.ConnPool, addr string) {
		if err := pool.RPC(ctx, addr, "Status.Ping", &structs.GenericRequest{}, &structs.PingResponse{}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("plaintext", func(b *testing.B) {
		pool := nomad.NewConnPool(0)
		defer pool.Close()
		for b.Loop() {
			ping(b, pool, plain.Addr)
		}
	})
	b.Run("mtls", func(b *testing.B) {
		pool := nomad.NewConnPool(0).WithTLS(clientTLS)
		defer pool.Close()
		for b.Loop() {
			ping(b, pool, secure.Addr)
		}
	})
	b.Run("mtls-new-connection", func(b *testing.B) {
		for b.Loop() {
			pool := nomad.NewConnPool(0).WithTLS(clientTLS)
			ping(b, pool, secure.Addr)
			pool.Close()
		}
	})
}
