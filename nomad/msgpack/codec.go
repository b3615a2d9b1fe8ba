// Package msgpack is how Berth's data model travels and rests: msgpack
// (hashicorp/go-msgpack) with one shared handle for Raft log entries, FSM
// snapshots, the client's bbolt state and RPC, and net/rpc's codec over
// that encoding. Servers use it for Raft and RPC, clients for their node
// session and state file; nomad/structs itself stays free of encodings.
//
// The bytes are persisted (Raft logs, snapshots, client state), so any
// change to the handle's options is a change of on-disk format:
// codec_test.go pins the bytes of a representative message.
package msgpack

import (
	"bytes"
	"fmt"
	"reflect"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/berth-io/berth/nomad/structs"
)

var msgpackHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.RawToString = true
	// Untyped maps (task driver config) decode as map[string]any instead
	// of map[any]any, so they survive a round trip into JSON.
	h.MapType = reflect.TypeOf(map[string]any(nil))
	return h
}()

// Handle is the codec shared by Raft entries, snapshots, client
// state and RPC, so all of them encode a struct the same way.
func Handle() *codec.MsgpackHandle { return msgpackHandle }

// Encode frames msg as one Raft entry: the type byte, then msgpack.
func Encode(t structs.MessageType, msg any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(uint8(t))
	if err := codec.NewEncoder(&buf, msgpackHandle).Encode(msg); err != nil {
		return nil, fmt.Errorf("encoding message type %d: %w", t, err)
	}
	return buf.Bytes(), nil
}

// Decode reads msgpack bytes (without the type byte) into out.
func Decode(buf []byte, out any) error {
	return codec.NewDecoderBytes(buf, msgpackHandle).Decode(out)
}
