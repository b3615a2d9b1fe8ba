package msgpack

import (
	"bufio"
	"bytes"
	"io"
	"math"
	"net/rpc"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

// readFrame cuts exactly one value off the stream, whatever its formats:
// every width of int, float, string, binary, array and map, time (an
// extension), nil and bools, nested.
func TestReadFrame_CutsOneValue(t *testing.T) {
	values := []any{
		map[string]any{
			"fix": 1, "neg": -3, "u8": uint8(200), "u16": uint16(60000), "u32": uint32(1 << 30), "u64": uint64(math.MaxUint64),
			"i8": int8(-100), "i16": int16(-30000), "i32": int32(-1 << 30), "i64": int64(math.MinInt64),
			"f32": float32(1.5), "f64": 2.25, "nil": nil, "t": true, "f": false,
			"s8": strings.Repeat("a", 40), "s16": strings.Repeat("b", 300), "s32": strings.Repeat("c", 70000),
			"bin": []byte("raw"), "bin16": bytes.Repeat([]byte{1}, 300),
			"when":  time.Unix(1700000000, 5).UTC(),
			"arr16": make([]int, 20), "arr32": make([]int8, 70000),
			"nested": map[string]any{"a": []any{map[string]any{"b": []any{}}}},
		},
		&structs.JobRegisterRequest{Job: &structs.Job{ID: "j", TaskGroups: []*structs.TaskGroup{{Name: "g"}}}},
		"", 0, []any{},
	}
	var stream bytes.Buffer
	var want [][]byte
	for _, v := range values {
		var one bytes.Buffer
		must.NoError(t, codec.NewEncoder(&one, Handle()).Encode(v))
		want = append(want, one.Bytes())
		stream.Write(one.Bytes())
	}
	r := bufio.NewReader(&stream)
	for i := range values {
		var got bytes.Buffer
		must.NoError(t, readFrame(r, &got))
		must.Eq(t, want[i], got.Bytes(), must.Sprintf("value %d", i))
	}
	var got bytes.Buffer
	must.ErrorIs(t, readFrame(r, &got), io.EOF)
}

// 12 bytes claiming a 2.5 GB time value (a fuzz input) are refused after
// reading what arrived, not by allocating what they claim.
func TestRPCCodec_ClaimedLengthIsNotAllocated(t *testing.T) {
	for name, b := range map[string][]byte{
		"time ext32 in a header": {0x82, 0xa3, 0x30, 0x30, 0x8c, 0xc9, 0x97, 0xdb, 0xa5, 0x30, 0xff, 0xff},
		"str32":                  {0xdb, 0xff, 0xff, 0xff, 0xf0, 0x61},
		"array32":                {0xdd, 0xff, 0xff, 0xff, 0xf0, 0x01},
		"map32 of arrays":        {0xdf, 0x7f, 0xff, 0xff, 0xf0, 0xdd, 0xff, 0xff, 0xff, 0xff},
	} {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			c := NewRPCCodec(rwc{Reader: bytes.NewReader(b), Writer: io.Discard})
			var h rpc.Request
			must.Error(t, c.ReadRequestHeader(&h))
			runtime.ReadMemStats(&after)
			must.Less(t, uint64(1<<20), after.TotalAlloc-before.TotalAlloc)
		})
	}
}
