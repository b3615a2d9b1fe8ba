package state

import (
	"bytes"
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/berth-io/berth/nomad/msgpack"
)

// encode and decode use the servers' msgpack handle: driver config maps
// decode as map[string]any and integers stay integers.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := codec.NewEncoder(&buf, msgpack.Handle()).Encode(v); err != nil {
		return nil, fmt.Errorf("encoding %T: %w", v, err)
	}
	return buf.Bytes(), nil
}

func decode(b []byte, out any) error {
	if err := codec.NewDecoderBytes(b, msgpack.Handle()).Decode(out); err != nil {
		return fmt.Errorf("decoding %T: %w", out, err)
	}
	return nil
}
