package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/berth-io/berth/nomad/structs"
)

// Limits on what one HTTP request may cost the agent. A request over one
// gets a 4xx naming the limit; nothing past it is read or decoded.
const (
	// DefaultHTTPMaxBodyBytes is limits.http_max_body_bytes unless set.
	DefaultHTTPMaxBodyBytes = 8 << 20
	// DefaultRPCMaxConnsPerClient is limits.rpc_max_conns_per_client
	// unless set: open RPC connections from one source IP.
	DefaultRPCMaxConnsPerClient = 100

	// httpBodyReadTimeout bounds reading one request body, so a client
	// trickling bytes cannot hold a handler. It is a deadline on the
	// body only: a server-wide ReadTimeout would also cut blocking
	// queries, since net/http cancels a request's context when the
	// connection's read deadline passes.
	httpBodyReadTimeout = 30 * time.Second
	// httpWriteTimeout bounds writing a reply; it must outlast the
	// longest blocking query (with its jitter).
	httpWriteTimeout = structs.MaxBlockingQueryTime*17/16 + time.Minute
	// httpIdleTimeout closes keep-alive connections nobody uses.
	httpIdleTimeout = 2 * time.Minute
	// httpReadHeaderTimeout bounds reading a request's headers.
	httpReadHeaderTimeout = 10 * time.Second

	// maxJSONDepth is how deeply a request body may nest. Real jobs nest
	// a dozen levels; a task config nested thousands deep cost the
	// servers a Raft entry no FSM could decode.
	maxJSONDepth = 64

	// maxErrorBytes caps an error body: errors echo input (IDs, paths)
	// and must not echo megabytes of it.
	maxErrorBytes = 4 << 10
)

// LimitsConfig is the agent config's `limits {}` block.
type LimitsConfig struct {
	HTTPMaxBodyBytes     *int `hcl:"http_max_body_bytes,optional"`
	RPCMaxConnsPerClient *int `hcl:"rpc_max_conns_per_client,optional"`
}

// httpMaxBody is the body limit in effect.
func (c *Config) httpMaxBody() int64 {
	if c.Limits != nil && c.Limits.HTTPMaxBodyBytes != nil {
		return int64(*c.Limits.HTTPMaxBodyBytes)
	}
	return DefaultHTTPMaxBodyBytes
}

// rpcMaxConnsPerClient is the per-source RPC connection cap (0: none).
func (c *Config) rpcMaxConnsPerClient() int {
	if c.Limits != nil && c.Limits.RPCMaxConnsPerClient != nil {
		return *c.Limits.RPCMaxConnsPerClient
	}
	return DefaultRPCMaxConnsPerClient
}

func (l *LimitsConfig) validate() []error {
	var errs []error
	if l == nil {
		return nil
	}
	if p := l.HTTPMaxBodyBytes; p != nil && *p <= 0 {
		errs = append(errs, fmt.Errorf("limits.http_max_body_bytes = %d must be positive", *p))
	}
	if p := l.RPCMaxConnsPerClient; p != nil && *p < 0 {
		errs = append(errs, fmt.Errorf("limits.rpc_max_conns_per_client = %d must not be negative (0 means no limit)", *p))
	}
	return errs
}

func mergeLimits(c, o *LimitsConfig) *LimitsConfig {
	if o == nil {
		return c
	}
	out := LimitsConfig{}
	if c != nil {
		out = *c
	}
	if o.HTTPMaxBodyBytes != nil {
		out.HTTPMaxBodyBytes = o.HTTPMaxBodyBytes
	}
	if o.RPCMaxConnsPerClient != nil {
		out.RPCMaxConnsPerClient = o.RPCMaxConnsPerClient
	}
	return &out
}

// readBody reads a request's whole body, within the size limit and the
// body deadline, and checks that JSON in it nests no deeper than allowed;
// handlers then decode from memory. Reading it here, not in each
// handler, puts every write endpoint under the same limits.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	if r.ContentLength > limit {
		return bodyTooLarge(limit)
	}
	rc := http.NewResponseController(w)
	// Not every ResponseWriter supports deadlines (httptest's does not);
	// the size limit holds either way.
	deadline := rc.SetReadDeadline(time.Now().Add(timeout)) == nil
	buf, err := readAll(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit)
	r.Body.Close()
	if err != nil {
		// Close the connection after the reply: net/http would otherwise
		// try to read the rest of the body before answering, and that is
		// what the client is not sending.
		w.Header().Set("Connection", "close")
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return bodyTooLarge(limit)
		case errors.Is(err, os.ErrDeadlineExceeded):
			return CodedError(http.StatusRequestTimeout,
				fmt.Sprintf("reading the request body took over %s; send it at once", timeout))
		}
		return CodedError(http.StatusBadRequest, fmt.Sprintf("reading request body: %v", err))
	}
	if deadline {
		rc.SetReadDeadline(time.Time{})
	}
	if d := jsonDepth(buf); d > maxJSONDepth {
		return CodedError(http.StatusBadRequest,
			fmt.Sprintf("request body nests deeper than %d levels; flatten it", maxJSONDepth))
	}
	r.Body = &readBodyBuf{Reader: bytes.NewReader(buf), buf: buf}
	return nil
}

// readBodyBuf is a body readBody read in full: a handler that wants the
// bytes themselves (decodeVolumesBody) takes buf instead of reading them
// into a second buffer, which was a sixth of the agent's time on a
// register of 1,000 volumes.
type readBodyBuf struct {
	*bytes.Reader
	buf []byte
}

func (*readBodyBuf) Close() error { return nil }

// bodyBytes is the whole body of r: readBody's buffer when it read the
// body, else what is left of the body, read now.
func bodyBytes(r *http.Request) ([]byte, error) {
	if b, ok := r.Body.(*readBodyBuf); ok && b.Reader.Size() == int64(b.Reader.Len()) {
		return b.buf, nil
	}
	return io.ReadAll(r.Body)
}

// readAll is io.ReadAll sized once from the Content-Length (when it is
// known and within limit) instead of growing a buffer through the body.
func readAll(r io.Reader, contentLength, limit int64) ([]byte, error) {
	if contentLength <= 0 || contentLength > limit {
		return io.ReadAll(r)
	}
	var b bytes.Buffer
	// ReadFrom wants MinRead bytes free before each read: one more
	// than the body, so the read that finds EOF does not grow it.
	b.Grow(int(contentLength) + bytes.MinRead)
	_, err := b.ReadFrom(r)
	return b.Bytes(), err
}

func bodyTooLarge(limit int64) error {
	return CodedError(http.StatusRequestEntityTooLarge,
		fmt.Sprintf("request body is larger than the limit of %d bytes (limits.http_max_body_bytes in the agent config)", limit))
}

// jsonDepth is how deeply objects and arrays nest in buf, which need not
// be valid JSON (the decoder reports that); brackets inside strings do
// not count. It stops counting once past maxJSONDepth. A string is
// skipped by searching for its closing quote (bytes.IndexByte) rather
// than byte by byte: most of a body is strings, and the byte loop was 2 ms
// of an 800 KB volume register.
func jsonDepth(buf []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(buf); i++ {
		switch buf[i] {
		case '"':
			i = stringEnd(buf, i+1)
		case '{', '[':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > maxJSONDepth {
					return deepest
				}
			}
		case '}', ']':
			depth--
		}
	}
	return deepest
}

// stringEnd is the index of the quote that ends the string whose content
// starts at start, or len(buf) when it does not end. A quote ends it when
// an even number of backslashes precedes it: each pair is one escaped
// backslash, and an odd one out escapes the quote.
func stringEnd(buf []byte, start int) int {
	for i := start; i < len(buf); {
		q := bytes.IndexByte(buf[i:], '"')
		if q < 0 {
			return len(buf)
		}
		q += i
		n := 0
		for j := q - 1; j >= start && buf[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return q
		}
		i = q + 1
	}
	return len(buf)
}

// truncateError shortens an error body over maxErrorBytes, saying so.
func truncateError(msg string) string {
	if len(msg) <= maxErrorBytes {
		return msg
	}
	return fmt.Sprintf("%s... (%d more bytes of error truncated)", msg[:maxErrorBytes], len(msg)-maxErrorBytes)
}
