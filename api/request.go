package api

import (
	"context"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
)

// pointerOf returns a pointer to a copy of v. The wire types use pointers
// where Nomad's do, so that a sparse request body leaves fields unset.
func pointerOf[T any](v T) *T { return &v }

// withQueryParams returns a copy of q with the key/value pairs kv added to
// its Params; q itself is not changed.
func withQueryParams(q *QueryOptions, kv ...string) *QueryOptions {
	out := QueryOptions{}
	if q != nil {
		out = *q
	}
	params := maps.Clone(out.Params)
	if params == nil {
		params = make(map[string]string, len(kv)/2)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		params[kv[i]] = kv[i+1]
	}
	out.Params = params
	return &out
}

// writeWithHeaders is write with extra request headers, for the few
// endpoints that take data in headers (X-Nomad-CSI-Secrets).
func (c *Client) writeWithHeaders(method, path string, headers map[string]string, body, out any, w *WriteOptions) (*WriteMeta, error) {
	v := url.Values{}
	var ctx context.Context
	ns := c.config.Namespace
	if w != nil {
		ctx = w.ctx
		if w.Namespace != "" {
			ns = w.Namespace
		}
		for k, val := range w.Params {
			v.Set(k, val)
		}
	}
	if ns != "" {
		v.Set("namespace", ns)
	}
	req, err := c.newRequest(ctx, method, path, v, body)
	if err != nil {
		return nil, err
	}
	for k, val := range headers {
		req.Header.Set(k, val)
	}
	start := time.Now()
	resp, err := c.do(req, out)
	if err != nil {
		return nil, err
	}
	wm := &WriteMeta{RequestTime: time.Since(start)}
	wm.LastIndex = parseQueryMeta(resp).LastIndex
	return wm, nil
}

// CSISecretsHeader is the request header that carries CSI secrets on
// endpoints without a body (volume delete, snapshot delete and list).
const CSISecretsHeader = "X-Nomad-CSI-Secrets"

// EncodeCSISecrets renders secrets the way the X-Nomad-CSI-Secrets header
// carries them: "k=v,k2=v2", sorted by key so the header is stable.
func EncodeCSISecrets(s CSISecrets) string {
	pairs := make([]string, 0, len(s))
	for _, k := range slices.Sorted(maps.Keys(s)) {
		pairs = append(pairs, k+"="+s[k])
	}
	return strings.Join(pairs, ",")
}

// DecodeCSISecrets parses an X-Nomad-CSI-Secrets header value. Pairs
// without "=" are skipped; a value may itself contain "=".
func DecodeCSISecrets(h string) CSISecrets {
	if h == "" {
		return nil
	}
	out := CSISecrets{}
	for _, pair := range strings.Split(h, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" {
			continue
		}
		out[k] = v
	}
	return out
}
