package msgpack

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxMessageSize bounds one msgpack value read from an RPC connection.
// Raft entries are bounded at 16 MB; replies (a long list) may be larger,
// but not without limit.
const MaxMessageSize = 64 << 20

// errTooLarge: a value on the connection claims more than MaxMessageSize.
var errTooLarge = errors.New("msgpack: message larger than the limit")

// readFrame copies the next complete msgpack value from r into buf
// (reset first) without decoding it. The decoder is then run on bytes,
// never on the stream: go-msgpack, reading from a stream, allocates a
// time extension's claimed length before reading it, so 12 bytes on an
// RPC connection claiming a 2.5 GB time value made the server allocate
// 2.5 GB (the RPC codec's fuzz target died of it under load). Here a
// string, binary or extension grows buf only as its bytes arrive, and the
// whole value is refused past MaxMessageSize.
func readFrame(r *bufio.Reader, buf *bytes.Buffer) error {
	buf.Reset()
	pending := 1 // values still to read: containers add their elements
	for pending > 0 {
		pending--
		b, err := r.ReadByte()
		if err != nil {
			if buf.Len() > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		buf.WriteByte(b)
		var n, data uint64 // n: the width of a length that follows; data: bytes after it
		switch {
		case b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3:
			// fixint, nil, bool: the byte is the value
		case b >= 0x80 && b <= 0x8f:
			pending += 2 * int(b&0x0f)
		case b >= 0x90 && b <= 0x9f:
			pending += int(b & 0x0f)
		case b >= 0xa0 && b <= 0xbf:
			data = uint64(b & 0x1f)
		case b == 0xc4 || b == 0xd9: // bin8, str8
			n = 1
		case b == 0xc5 || b == 0xda:
			n = 2
		case b == 0xc6 || b == 0xdb:
			n = 4
		case b == 0xc7, b == 0xc8, b == 0xc9: // ext8/16/32: length, then a type byte
			n = 1 << (b - 0xc7)
		case b == 0xca, b == 0xcb: // float32, float64
			data = 4 << (b - 0xca)
		case b >= 0xcc && b <= 0xcf: // uint8..64
			data = 1 << (b - 0xcc)
		case b >= 0xd0 && b <= 0xd3: // int8..64
			data = 1 << (b - 0xd0)
		case b >= 0xd4 && b <= 0xd8: // fixext1..16: a type byte, then the data
			data = 1 + 1<<(b-0xd4)
		case b == 0xdc || b == 0xde: // array16, map16
			n = 2
		case b == 0xdd || b == 0xdf: // array32, map32
			n = 4
		default: // 0xc1 is never used
			return fmt.Errorf("msgpack: invalid byte 0x%x", b)
		}
		if n > 0 {
			var l [4]byte
			if _, err := io.ReadFull(r, l[:n]); err != nil {
				return unexpected(err)
			}
			buf.Write(l[:n])
			length := uint64(0)
			for _, c := range l[:n] {
				length = length<<8 | uint64(c)
			}
			switch b {
			case 0xdc, 0xdd:
				pending += int(min(length, MaxMessageSize))
			case 0xde, 0xdf:
				pending += 2 * int(min(length, MaxMessageSize))
			case 0xc7, 0xc8, 0xc9:
				data = length + 1
			default:
				data = length
			}
			// Every element takes a byte at least: more pending than
			// the limit allows cannot be a message we take.
			if pending > MaxMessageSize {
				return errTooLarge
			}
		}
		if data > 0 {
			if uint64(buf.Len())+data > MaxMessageSize {
				return errTooLarge
			}
			if _, err := io.CopyN(buf, r, int64(data)); err != nil {
				return unexpected(err)
			}
		}
	}
	return nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
