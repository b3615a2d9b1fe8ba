package msgpack

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/rpc"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

type goldInner struct {
	Region    string
	Forwarded bool
}

type goldMsg struct {
	ID     string
	Count  int
	Index  uint64
	TTL    time.Duration
	Raw    []byte
	Config map[string]any
	Tags   []string
	Ptr    *goldInner
	Nil    *goldInner
	goldInner
}

// goldenEntry is the Raft entry for goldMsg as the encoding wrote it when
// it lived in nomad/structs: Raft logs, snapshots and client state files
// written before the move must still decode, and peers of both versions
// must understand each other. Map keys are single so the bytes do not
// depend on map iteration order.
const goldenEntry = "0d8ba6436f6e66696781a46172677392a22d6381a16e01a5436f756e74fd" +
	"a9466f72776172646564c3a24944a5766f6c2d31a5496e646578cf0000010000000000" +
	"a34e696cc0a350747282a9466f72776172646564c2a6526567696f6ea6676c6f62616c" +
	"a3526177a30001ffa6526567696f6ea172a354544cd259682f00a45461677392a161a162"

func goldValue() *goldMsg {
	return &goldMsg{
		ID: "vol-1", Count: -3, Index: 1 << 40, TTL: 1500 * time.Millisecond, Raw: []byte{0, 1, 255},
		Config:    map[string]any{"args": []any{"-c", map[string]any{"n": 1}}},
		Tags:      []string{"a", "b"},
		Ptr:       &goldInner{Region: "global"},
		goldInner: goldInner{Region: "r", Forwarded: true},
	}
}

func TestEncode_WireFormatUnchanged(t *testing.T) {
	b, err := Encode(structs.CSIVolumeClaimRequestType, goldValue())
	must.NoError(t, err)
	must.Eq(t, goldenEntry, hex.EncodeToString(b))
}

func TestDecode_GoldenEntry(t *testing.T) {
	b, err := hex.DecodeString(goldenEntry)
	must.NoError(t, err)
	must.Eq(t, uint8(structs.CSIVolumeClaimRequestType), b[0])
	var got goldMsg
	must.NoError(t, Decode(b[1:], &got))
	want := goldValue()
	// Untyped maps come back as map[string]any and integers as int64 or
	// uint64: what JSON encoding of driver config expects.
	want.Config = map[string]any{"args": []any{"-c", map[string]any{"n": int64(1)}}}
	must.Eq(t, want, &got)
}

func TestEncode_RoundTripsRequests(t *testing.T) {
	req := &structs.CSIVolumeClaimRequest{
		VolumeID: "db", AllocationID: "a1", NodeID: "n1", ExternalNodeID: "ext-1",
		Mode:         structs.CSIVolumeClaimWrite,
		WriteRequest: structs.WriteRequest{Region: "global", Namespace: "default"},
	}
	b, err := Encode(structs.CSIVolumeClaimRequestType, req)
	must.NoError(t, err)
	must.Eq(t, uint8(structs.CSIVolumeClaimRequestType), b[0])
	var got structs.CSIVolumeClaimRequest
	must.NoError(t, Decode(b[1:], &got))
	must.Eq(t, req, &got)
}

func TestDecode_Garbage(t *testing.T) {
	var got structs.CSIVolumeClaimRequest
	must.Error(t, Decode([]byte{0xc1}, &got)) // 0xc1 is never used in msgpack
}

// Echo is a net/rpc service for the codec tests.
type Echo struct{}

func (Echo) Say(args *structs.CSIVolumeClaimRequest, reply *structs.CSIVolumeClaimRequest) error {
	if args.VolumeID == "" {
		return structs.WireError(structs.NewError(structs.CodeInvalid, "missing volume ID"))
	}
	*reply = *args
	return nil
}

func TestRPCCodec_CallsAndErrors(t *testing.T) {
	srv := rpc.NewServer()
	must.NoError(t, srv.Register(Echo{}))
	a, b := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeCodec(NewRPCCodec(a))
	}()
	c := rpc.NewClientWithCodec(NewRPCCodec(b))

	args := &structs.CSIVolumeClaimRequest{VolumeID: "db", AllocationID: "a1"}
	var reply structs.CSIVolumeClaimRequest
	must.NoError(t, c.Call("Echo.Say", args, &reply))
	must.Eq(t, args, &reply)

	// An error reply has a body the client skips; the next call on the
	// same connection must still work.
	err := c.Call("Echo.Say", &structs.CSIVolumeClaimRequest{}, &reply)
	must.True(t, errors.Is(structs.DecodeWireError(err), structs.ErrInvalid), must.Sprint(err))
	must.NoError(t, c.Call("Echo.Say", args, &reply))

	must.NoError(t, c.Close())
	<-done
	must.ErrorIs(t, c.Call("Echo.Say", args, &reply), rpc.ErrShutdown)
}

// BenchmarkEncodeRegister1000 encodes the Raft entry of a 1,000-volume
// register (the leader encodes it once; it was a tenth of the request's
// CPU). go test -run '^$' -bench EncodeRegister1000 -benchmem ./nomad/msgpack/
func BenchmarkEncodeRegister1000(b *testing.B) {
	req := &structs.CSIVolumeRegisterRequest{WriteRequest: structs.WriteRequest{Region: "global", Namespace: "default"}}
	for i := range 1000 {
		id := fmt.Sprintf("vol-%04d", i)
		req.Volumes = append(req.Volumes, &structs.CSIVolume{
			ID: id, Name: id, Namespace: "default", PluginID: "hostpath", Provider: "org.example.hostpath", ProviderVersion: "1.2.3",
			RequestedCapabilities: []*structs.CSIVolumeCapability{{
				AccessMode:     structs.CSIVolumeAccessModeSingleNodeWriter,
				AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
			}},
			State: structs.CSIVolumeStateReady, CreateTime: 1, ModifyTime: 1,
		})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(structs.CSIVolumeRegisterRequestType, req); err != nil {
			b.Fatal(err)
		}
	}
}
