package testutil

import "testing"

// A PING counts, its acknowledgement and other frames do not, and a frame
// cut short is reported as bytes left.
func TestHTTP2Pings(t *testing.T) {
	frame := func(typ, flags byte, payload int) []byte {
		return append([]byte{0, 0, byte(payload), typ, flags, 0, 0, 0, 0}, make([]byte, payload)...)
	}
	var b []byte
	b = append(b, frame(0x6, 0, 8)...) // PING
	b = append(b, frame(0x6, 1, 8)...) // PING ack
	b = append(b, frame(0x0, 0, 5)...) // DATA
	b = append(b, frame(0x6, 0, 8)...) // PING
	if pings, left := HTTP2Pings(b); pings != 2 || left != 0 {
		t.Fatalf("pings %d, left %d; want 2, 0", pings, left)
	}
	if _, left := HTTP2Pings(append(b, 0, 0, 8, 6)); left != 4 {
		t.Fatalf("left %d; want the 4 bytes of a cut header", left)
	}
}
