package testutil

import "encoding/binary"

// HTTP2Pings counts the PING frames that are not acknowledgements in b,
// a run of HTTP/2 frames (a 9-byte header: 24-bit length, type, flags,
// stream; then the payload), and returns how many bytes of a frame cut
// short are left at its end (0 when b ends on a frame boundary).
func HTTP2Pings(b []byte) (pings, left int) {
	const typePing, flagAck = 0x6, 0x1
	for len(b) >= 9 {
		n := int(binary.BigEndian.Uint32(append([]byte{0}, b[:3]...)))
		if b[3] == typePing && b[4]&flagAck == 0 {
			pings++
		}
		b = b[min(len(b), 9+n):]
	}
	return pings, len(b)
}
