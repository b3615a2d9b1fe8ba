package helper

import (
	"crypto/rand"
	"fmt"
)

// UUID returns a random RFC 4122 version 4 UUID. Only leaders and clients
// call it; the FSM never does (IDs are stamped into requests).
func UUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err)) // crypto/rand never fails on Linux
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// ShortID returns the first 8 characters of an ID, as CLIs show it.
func ShortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
