package nomad

import (
	"bufio"
	"io"
	"net/rpc"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/berth-io/berth/nomad/structs"
)

// msgpackCodec is net/rpc's client and server codec over msgpack: each
// message is the rpc header, then the body, with the same handle Raft
// entries use. (net-rpc-msgpackrpc's codec races Close against reads, which
// -race reports on every server shutdown; this one does not.)
type msgpackCodec struct {
	conn io.ReadWriteCloser
	dec  *codec.Decoder

	// writeLock guards enc and bw: net/rpc writes from several goroutines.
	writeLock sync.Mutex
	bw        *bufio.Writer
	enc       *codec.Encoder

	closed atomic.Bool
}

func newMsgpackCodec(conn io.ReadWriteCloser) *msgpackCodec {
	bw := bufio.NewWriter(conn)
	return &msgpackCodec{
		conn: conn,
		dec:  codec.NewDecoder(bufio.NewReader(conn), structs.MsgpackHandle()),
		bw:   bw,
		enc:  codec.NewEncoder(bw, structs.MsgpackHandle()),
	}
}

func (c *msgpackCodec) write(header, body any) error {
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

func (c *msgpackCodec) read(v any) error {
	if c.closed.Load() {
		return io.EOF
	}
	return c.dec.Decode(v)
}

func (c *msgpackCodec) WriteRequest(r *rpc.Request, body any) error { return c.write(r, body) }
func (c *msgpackCodec) ReadResponseHeader(r *rpc.Response) error    { return c.read(r) }
func (c *msgpackCodec) ReadResponseBody(body any) error             { return c.readBody(body) }
func (c *msgpackCodec) ReadRequestHeader(r *rpc.Request) error      { return c.read(r) }
func (c *msgpackCodec) ReadRequestBody(body any) error              { return c.readBody(body) }

// readBody decodes a body; net/rpc passes nil to skip one (e.g. after an
// error reply), which the decoder cannot take, so it decodes into a throwaway.
func (c *msgpackCodec) readBody(body any) error {
	if body == nil {
		var discard any
		return c.read(&discard)
	}
	return c.read(body)
}

func (c *msgpackCodec) WriteResponse(r *rpc.Response, body any) error { return c.write(r, body) }

func (c *msgpackCodec) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.conn.Close()
}
