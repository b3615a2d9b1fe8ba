package msgpack

import (
	"bufio"
	"bytes"
	"io"
	"net/rpc"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// RPCCodec is net/rpc's client and server codec over msgpack: each
// message is the rpc header, then the body, with the same handle Raft
// entries use. Servers speak it to each other and to clients, and clients
// serve their node session with it. (net-rpc-msgpackrpc's codec races Close against reads, which
// -race reports on every server shutdown; this one does not.)
type RPCCodec struct {
	conn io.ReadWriteCloser
	// br and dec are used by one reader at a time: net/rpc reads a
	// connection from one goroutine. Each message is framed off br first
	// (readFrame), then decoded from its bytes.
	br  *bufio.Reader
	dec *codec.Decoder

	// writeLock guards enc and bw: net/rpc writes from several goroutines.
	writeLock sync.Mutex
	bw        *bufio.Writer
	enc       *codec.Encoder

	closed atomic.Bool
}

// NewRPCCodec returns a codec over conn; closing the codec closes conn.
func NewRPCCodec(conn io.ReadWriteCloser) *RPCCodec {
	bw := bufio.NewWriter(conn)
	return &RPCCodec{
		conn: conn,
		br:   bufio.NewReader(conn),
		dec:  codec.NewDecoderBytes(nil, Handle()),
		bw:   bw,
		enc:  codec.NewEncoder(bw, Handle()),
	}
}

func (c *RPCCodec) write(header, body any) error {
	c.writeLock.Lock()
	defer c.writeLock.Unlock()
	if c.closed.Load() {
		return io.EOF
	}
	if err := c.enc.Encode(header); err != nil {
		return err
	}
	if err := c.enc.Encode(body); err != nil {
		return err
	}
	return c.bw.Flush()
}

func (c *RPCCodec) read(v any) error {
	if c.closed.Load() {
		return io.EOF
	}
	// A fresh buffer per message: decoded values may share its bytes.
	var frame bytes.Buffer
	if err := readFrame(c.br, &frame); err != nil {
		return err
	}
	c.dec.ResetBytes(frame.Bytes())
	return c.dec.Decode(v)
}

func (c *RPCCodec) WriteRequest(r *rpc.Request, body any) error { return c.write(r, body) }
func (c *RPCCodec) ReadResponseHeader(r *rpc.Response) error    { return c.read(r) }
func (c *RPCCodec) ReadResponseBody(body any) error             { return c.readBody(body) }
func (c *RPCCodec) ReadRequestHeader(r *rpc.Request) error      { return c.read(r) }
func (c *RPCCodec) ReadRequestBody(body any) error              { return c.readBody(body) }

// readBody decodes a body; net/rpc passes nil to skip one (e.g. after an
// error reply), which the decoder cannot take, so it decodes into a throwaway.
func (c *RPCCodec) readBody(body any) error {
	if body == nil {
		var discard any
		return c.read(&discard)
	}
	return c.read(body)
}

func (c *RPCCodec) WriteResponse(r *rpc.Response, body any) error { return c.write(r, body) }

func (c *RPCCodec) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.conn.Close()
}
