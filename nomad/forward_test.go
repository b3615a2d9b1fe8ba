package nomad

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

// A forwarded call whose connection to the leader breaks answers with a
// code clients retry, not CodeInternal (final for a client's claim); the
// leader's own coded errors reach the caller unchanged.
func TestForwardError(t *testing.T) {
	must.NoError(t, forwardError("CSIVolume.Claim", "127.0.0.1:4647", nil))

	transport := fmt.Errorf("rpc CSIVolume.Claim to 127.0.0.1:4647: %w", io.ErrUnexpectedEOF)
	must.Eq(t, structs.CodeInternal, structs.CodeOf(structs.DecodeWireError(structs.WireError(transport))),
		must.Sprint("unmapped, a transport failure crosses the wire as internal"))
	got := structs.DecodeWireError(structs.WireError(forwardError("CSIVolume.Claim", "127.0.0.1:4647", transport)))
	must.Eq(t, structs.CodeNoLeader, structs.CodeOf(got))
	must.StrContains(t, got.Error(), "forwarding CSIVolume.Claim to the leader at 127.0.0.1:4647 failed")
	must.StrContains(t, got.Error(), "unexpected EOF")

	coded := structs.NewError(structs.CodeInvalid, "volume %q: bad access mode", "db")
	must.True(t, errors.Is(forwardError("CSIVolume.Claim", "x", coded), coded))
}
