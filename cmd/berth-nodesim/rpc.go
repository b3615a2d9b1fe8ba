package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/structs"
)

// inProcess reaches the in-process server. It hides the server's
// DialNodeSession on purpose: a node session is a TCP connection per node,
// and thousands of them from one loopback address would hit the server's
// per-source connection cap. The simulated plugin is node-only, so no
// claim needs the session (controller publish does).
type inProcess struct{ s *nomad.Server }

func (p inProcess) RPC(method string, args, reply any) error { return p.s.RPC(method, args, reply) }

// remote reaches a server over the network like an agent's client does:
// one connection for ordinary calls and one for the blocking alloc watch,
// because a server answers the calls of one connection in order. Each
// simulated node has its own, as separate machines would.
type remote struct {
	addr     string
	pool     *nomad.ConnPool
	blocking *nomad.ConnPool
}

func newRemote(addr string) *remote {
	return &remote{addr: addr, pool: nomad.NewConnPool(10 * time.Second), blocking: nomad.NewConnPool(10 * time.Second)}
}

func (r *remote) RPC(method string, args, reply any) error {
	return r.RPCContext(context.Background(), method, args, reply)
}

func (r *remote) RPCContext(ctx context.Context, method string, args, reply any) error {
	pool := r.pool
	if q, ok := args.(*structs.NodeSpecificRequest); ok && q.MinQueryIndex > 0 {
		pool = r.blocking
	}
	return pool.RPC(ctx, r.addr, method, args, reply)
}

func (r *remote) Close() error {
	r.pool.Close()
	r.blocking.Close()
	return nil
}

// checkLoopback refuses a server address that is not on this machine: the
// simulator opens thousands of connections and must not be pointed at a
// shared cluster by accident.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-address %q: want host:port, e.g. 127.0.0.1:4647: %w", addr, err)
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return fmt.Errorf("-address %q: %w", addr, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return fmt.Errorf("-address %q resolves to %s, which is not a loopback address: berth-nodesim only runs against a server on this machine", addr, ip)
		}
	}
	return nil
}
