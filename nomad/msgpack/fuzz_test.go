package msgpack

import (
	"bytes"
	"io"
	"net/rpc"
	"testing"

	"github.com/berth-io/berth/nomad/structs"
)

// rwc is a byte stream an attacker sends, as a net.Conn would carry it.
type rwc struct {
	io.Reader
	io.Writer
}

func (rwc) Close() error { return nil }

// FuzzRPCCodec: whatever bytes arrive on an RPC connection after its
// protocol byte, the server side of the codec (read a request header,
// then its body into a real request type) returns errors and never
// panics. Nor does decoding a Raft entry body into the requests the FSM
// decodes.
func FuzzRPCCodec(f *testing.F) {
	var good bytes.Buffer
	c := NewRPCCodec(rwc{Reader: &bytes.Buffer{}, Writer: &good})
	_ = c.WriteRequest(&rpc.Request{ServiceMethod: "Job.Register", Seq: 1},
		&structs.JobRegisterRequest{Job: &structs.Job{ID: "j", TaskGroups: []*structs.TaskGroup{{Name: "g"}}}})
	f.Add(good.Bytes())
	f.Add([]byte{0x82, 0xad})
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})             // a map claiming 4 billion entries
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})             // an array claiming as many
	f.Add(bytes.Repeat([]byte{0x91}, 20000))                // nested 20,000 deep
	f.Add([]byte{0xc6, 0x7f, 0xff, 0xff, 0xff, 0x00, 0x01}) // a 2 GB bin
	f.Fuzz(func(t *testing.T, b []byte) {
		c := NewRPCCodec(rwc{Reader: bytes.NewReader(b), Writer: io.Discard})
		for range 4 {
			var h rpc.Request
			if err := c.ReadRequestHeader(&h); err != nil {
				break
			}
			var body structs.JobRegisterRequest
			if err := c.ReadRequestBody(&body); err != nil {
				break
			}
		}
		for _, out := range []any{
			&structs.JobRegisterRequest{}, &structs.ApplyPlanResultsRequest{},
			&structs.CSIVolumeRegisterRequest{}, &structs.NodeRegisterRequest{},
			&structs.CSIVolumeClaimBatchRequest{},
		} {
			_ = Decode(b, out)
		}
	})
}
