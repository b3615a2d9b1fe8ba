package structs

import (
	"bytes"
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// MessageType is the first byte of every Raft log entry; it says which
// request type the rest of the entry decodes into. Values are persisted in
// Raft logs and snapshots: never renumber, only append.
type MessageType uint8

const (
	NodeRegisterRequestType          MessageType = 0
	NodeDeregisterRequestType        MessageType = 1
	NodeUpdateStatusRequestType      MessageType = 2
	NodeUpdateDrainRequestType       MessageType = 3
	NodeUpdateEligibilityRequestType MessageType = 4
	JobRegisterRequestType           MessageType = 5
	JobDeregisterRequestType         MessageType = 6
	EvalUpdateRequestType            MessageType = 7
	EvalDeleteRequestType            MessageType = 8
	AllocClientUpdateRequestType     MessageType = 9
	ApplyPlanResultsRequestType      MessageType = 10
	CSIVolumeRegisterRequestType     MessageType = 11
	CSIVolumeDeregisterRequestType   MessageType = 12
	CSIVolumeClaimRequestType        MessageType = 13
	CSIPluginDeleteRequestType       MessageType = 14
	AllocDeleteRequestType           MessageType = 15
	NodeBatchUpdateStatusRequestType MessageType = 16
)

// IgnoreUnknownTypeFlag set on a message type tells an FSM that does not
// know the type to skip the entry instead of panicking. It lets a newer
// leader write entries an older follower may safely ignore.
const IgnoreUnknownTypeFlag MessageType = 128

var msgpackHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.RawToString = true
	h.MapType = mapStringAny
	return h
}()

// MsgpackHandle is the codec shared by Raft entries, snapshots and RPC, so
// all three encode a struct the same way.
func MsgpackHandle() *codec.MsgpackHandle { return msgpackHandle }

// Encode frames msg as one Raft entry: the type byte, then msgpack.
func Encode(t MessageType, msg any) ([]byte, error) {
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
