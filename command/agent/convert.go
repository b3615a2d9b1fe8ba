package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/berth-io/berth/nomad/structs"
)

// Conversion between the HTTP API's wire types (package api, Nomad's
// shapes) and the servers' data model (nomad/structs), one file per
// resource: convert_job.go, convert_alloc.go (allocs and evals),
// convert_node.go, convert_csi.go (volumes, plugins and their
// fingerprints). Conversions to api never copy secrets: CSI secrets stay
// on the servers. This file holds what they share, and the decoding of
// request bodies and write options.

// decodeBody decodes a JSON request body into out. Unknown fields are
// ignored, as Nomad's client sends fields Berth does not use.
func decodeBody(r *http.Request, out any) error {
	if r.Body == nil {
		return CodedError(http.StatusBadRequest, "missing request body")
	}
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(out); err != nil {
		if errors.Is(err, io.EOF) {
			return CodedError(http.StatusBadRequest, "missing request body")
		}
		return CodedError(http.StatusBadRequest, fmt.Sprintf("decoding request body: %v", err))
	}
	return nil
}

// parseWrite fills a WriteRequest from the URL and headers: namespace and
// region from the query string (never from the body, where Nomad's
// client sends them empty), the idempotency token, and the ACL token.
func parseWrite(r *http.Request, w *structs.WriteRequest) {
	v := r.URL.Query()
	w.Namespace = v.Get("namespace")
	w.Region = v.Get("region")
	w.IdempotencyToken = v.Get("idempotency_token")
	w.AuthToken = authToken(r)
}

func ptr[T any](v T) *T { return &v }

// each converts every element of in with f. A nil slice stays nil.
func each[E, T any](in []E, f func(E) T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, 0, len(in))
	for _, e := range in {
		out = append(out, f(e))
	}
	return out
}

// list is each for a list endpoint's answer: never nil, so the JSON is []
// rather than null, as Nomad answers.
func list[E, T any](in []E, f func(E) T) []T {
	if out := each(in, f); out != nil {
		return out
	}
	return []T{}
}

// eachValue converts every value of in with f. A nil map stays nil.
func eachValue[K comparable, E, T any](in map[K]E, f func(E) T) map[K]T {
	if in == nil {
		return nil
	}
	out := make(map[K]T, len(in))
	for k, e := range in {
		out[k] = f(e)
	}
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// nsTime turns unix nanoseconds into a time; 0 is the zero time, which
// JSON shows as "0001-01-01T00:00:00Z" as Nomad does.
func nsTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// trimPath returns the rest of r's path after prefix, or "" when the path
// is not under it.
func trimPath(r *http.Request, prefix string) string {
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok {
		return ""
	}
	return rest
}
