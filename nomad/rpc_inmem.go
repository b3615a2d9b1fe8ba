package nomad

import (
	"errors"
	"io"
	"net/rpc"
	"reflect"

	"github.com/berth-io/berth/nomad/structs"
)

// inmemCodec serves one in-process RPC (the HTTP API and the -dev client
// calling their own server) through net/rpc's dispatch without encoding:
// args and reply are copied by value. It keeps the endpoint skeleton
// (forwarding, blocking, errors) identical for local and remote callers.
type inmemCodec struct {
	method string
	args   any
	reply  any
	err    error
	read   bool
}

func (c *inmemCodec) ReadRequestHeader(r *rpc.Request) error {
	if c.read {
		return io.EOF
	}
	c.read = true
	r.ServiceMethod = c.method
	return nil
}

func (c *inmemCodec) ReadRequestBody(out any) error {
	if out == nil {
		return nil
	}
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(c.args).Elem())
	return nil
}

func (c *inmemCodec) WriteResponse(resp *rpc.Response, body any) error {
	if resp.Error != "" {
		c.err = structs.DecodeWireError(errors.New(resp.Error))
		return nil
	}
	if c.reply != nil && body != nil {
		reflect.ValueOf(c.reply).Elem().Set(reflect.ValueOf(body).Elem())
	}
	return nil
}

func (c *inmemCodec) Close() error { return nil }

// wire converts an endpoint's error into the form that carries its code
// across net/rpc. Every endpoint defers it: `defer wire(&err)`.
func wire(err *error) {
	if *err != nil {
		*err = structs.WireError(*err)
	}
}
