package client

import (
	"context"

	"github.com/berth-io/berth/nomad/structs"
)

// RPCer reaches the servers: the in-process server in -dev, a server pool
// otherwise. The client calls Node.Register, Node.UpdateStatus,
// Node.GetClientAllocs (blocking) and Node.UpdateAlloc. Errors keep their
// structs.Error code (errors.Is(err, structs.ErrNotFound) works). The
// client owns its RPCer: if it is an io.Closer, Shutdown closes it.
type RPCer interface {
	RPC(method string, args, reply any) error
}

// ContextRPCer is an RPCer that can abandon a call when ctx ends. The
// client uses it when the RPCer has it.
type ContextRPCer interface {
	RPCContext(ctx context.Context, method string, args, reply any) error
}

// rpc calls method, returning ctx.Err() as soon as ctx ends. Without
// ContextRPCer the call itself cannot be cancelled: it finishes in the
// background when the server answers, its reply unread (for a blocking
// query against the in-process -dev server, that is when the agent shuts
// the server down right after the client). Callers must not touch reply
// after an error.
func (c *Client) rpc(ctx context.Context, method string, args, reply any) error {
	// Every request the client sends carries its node secret: the
	// servers take it as the node's identity (node RPCs and claims
	// refuse anyone else).
	if ar, ok := args.(structs.AuthRequest); ok && ar.GetAuthToken() == "" {
		ar.SetAuthToken(c.nodeSecret())
	}
	err := c.rpcOnce(ctx, method, args, reply)
	if err == nil {
		// A server answered: a node session waiting out its redial
		// backoff redials now (redialer).
		select {
		case c.serverContact <- struct{}{}:
		default:
		}
	}
	return err
}

func (c *Client) rpcOnce(ctx context.Context, method string, args, reply any) error {
	if cr, ok := c.cfg.RPC.(ContextRPCer); ok {
		return cr.RPCContext(ctx, method, args, reply)
	}
	done := make(chan error, 1)
	go func() { done <- c.cfg.RPC.RPC(method, args, reply) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
