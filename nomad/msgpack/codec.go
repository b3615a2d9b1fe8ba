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
	"fmt"
	"reflect"
	"sync/atomic"

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

// encodeScratch holds a buffer Encode encodes into, kept across
// collections (a sync.Pool is emptied by them, and a 1,000-volume
// register makes one per request, so its entry grew a fresh buffer from
// 4 KB each time); one that grew past maxScratch is dropped. Encodes at
// the same time each take their own.
var encodeScratch atomic.Pointer[[]byte]

const maxScratch = 4 << 20

// Encode frames msg as one Raft entry: the type byte, then msgpack.
func Encode(t structs.MessageType, msg any) ([]byte, error) {
	// Straight into a reused byte slice, then one copy of the exact
	// size behind the type byte: through an io.Writer the encoder copied
	// every write into its own buffer and then into a bytes.Buffer that
	// grew by doubling (a 1,000-volume register's ~0.5 MB entry
	// allocated 1.31 MB, now 0.53 MB: BenchmarkEncodeRegister1000).
	scratch := encodeScratch.Swap(nil)
	if scratch == nil {
		b := make([]byte, 0, 4<<10)
		scratch = &b
	}
	body := (*scratch)[:0]
	err := codec.NewEncoderBytes(&body, msgpackHandle).Encode(msg)
	out := make([]byte, 1+len(body))
	out[0] = uint8(t)
	copy(out[1:], body)
	if cap(body) <= maxScratch {
		*scratch = body[:0]
		encodeScratch.Store(scratch)
	}
	if err != nil {
		return nil, fmt.Errorf("encoding message type %d: %w", t, err)
	}
	return out, nil
}

// Decode reads msgpack bytes (without the type byte) into out.
func Decode(buf []byte, out any) error {
	return codec.NewDecoderBytes(buf, msgpackHandle).Decode(out)
}
