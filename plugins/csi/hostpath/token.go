package hostpath

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// tokenPrefix marks our pagination tokens, so that a token from elsewhere is
// rejected (ABORTED) rather than silently misread.
const tokenPrefix = "hostpath/v1/"

// pageToken encodes "continue at the first ID >= id". Keying on the ID
// instead of an index keeps a token valid when entries before it are
// deleted between pages.
func pageToken(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(tokenPrefix + id))
}

// parsePageToken decodes a token made by pageToken; "" means the start.
func parsePageToken(tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || !strings.HasPrefix(string(b), tokenPrefix) {
		return "", fmt.Errorf("starting_token %q was not returned by this plugin; start again without a token", tok)
	}
	return strings.TrimPrefix(string(b), tokenPrefix), nil
}

// page returns the entries of sorted (by ID) that a request for up to max
// entries (0: no limit) starting at token gets, and the next token.
func page[T any](sorted []T, id func(T) string, token string, max int32) ([]T, string, error) {
	start, err := parsePageToken(token)
	if err != nil {
		return nil, "", err
	}
	if max < 0 {
		return nil, "", fmt.Errorf("max_entries must not be negative, got %d", max)
	}
	i := 0
	for i < len(sorted) && id(sorted[i]) < start {
		i++
	}
	rest := sorted[i:]
	if max == 0 || int(max) >= len(rest) {
		return rest, "", nil
	}
	return rest[:max], pageToken(id(rest[max])), nil
}
