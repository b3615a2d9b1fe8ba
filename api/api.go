// Package api is Berth's Go HTTP client and wire types. It speaks the same
// wire format as Nomad's HTTP API (PascalCase JSON, X-Nomad-* headers,
// plain-text errors), and imports nothing from the rest of Berth, so
// outside programs can use it.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config says where and how to reach an agent.
type Config struct {
	// Address is http://host:port, https://..., or unix:///path/to/socket.
	Address string
	// Token is sent as X-Nomad-Token.
	Token string
	// Namespace applies to requests that give none.
	Namespace string
	// TLSConfig, when set, configures HTTPS (ignored with HTTPClient).
	TLSConfig *TLSConfig
	// HTTPClient, when set, is used as it is.
	HTTPClient *http.Client
}

// DefaultConfig reads BERTH_ADDR (default http://127.0.0.1:4646),
// BERTH_TOKEN, BERTH_NAMESPACE, and for HTTPS BERTH_CACERT,
// BERTH_CLIENT_CERT, BERTH_CLIENT_KEY, BERTH_TLS_SERVER_NAME and
// BERTH_SKIP_VERIFY; each falls back to its NOMAD_* twin when unset, so
// an environment set up for Nomad's CLI works unchanged.
func DefaultConfig() *Config {
	c := &Config{Address: "http://127.0.0.1:4646"}
	if a := Getenv("ADDR"); a != "" {
		c.Address = a
	}
	c.Token = Getenv("TOKEN")
	c.Namespace = Getenv("NAMESPACE")
	c.TLSConfig = envTLS()
	return c
}

// Getenv reads BERTH_<name>, or NOMAD_<name> when that is unset or empty.
func Getenv(name string) string {
	if v := os.Getenv("BERTH_" + name); v != "" {
		return v
	}
	return os.Getenv("NOMAD_" + name)
}

// Client is an HTTP API client.
type Client struct {
	config  Config
	baseURL *url.URL
	http    *http.Client
}

// NewClient builds a client. A nil config means DefaultConfig.
func NewClient(c *Config) (*Client, error) {
	if c == nil {
		c = DefaultConfig()
	}
	cfg := *c
	addr := cfg.Address
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return nil, fmt.Errorf("invalid address %q: %w", c.Address, err)
	}
	hc := cfg.HTTPClient
	switch u.Scheme {
	case "http", "https":
		if hc == nil {
			tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8}
			if cfg.TLSConfig != nil {
				tc, err := cfg.TLSConfig.ClientConfig()
				if err != nil {
					return nil, fmt.Errorf("tls: %w", err)
				}
				tr.TLSClientConfig = tc
			}
			hc = &http.Client{Transport: tr}
		}
	case "unix":
		sock := u.Path
		if hc == nil {
			hc = &http.Client{Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "unix", sock)
				},
			}}
		}
		u = &url.URL{Scheme: "http", Host: "unix"}
	default:
		return nil, fmt.Errorf("invalid address %q: scheme must be http, https or unix", c.Address)
	}
	return &Client{config: cfg, baseURL: u, http: hc}, nil
}

// Address returns the configured address.
func (c *Client) Address() string { return c.config.Address }

// QueryOptions are the read options every list/get takes.
type QueryOptions struct {
	Namespace  string
	AllowStale bool
	WaitIndex  uint64
	WaitTime   time.Duration
	Prefix     string
	Filter     string
	PerPage    int32
	NextToken  string
	Params     map[string]string
	ctx        context.Context
}

// WithContext returns a copy that uses ctx for the request.
func (o *QueryOptions) WithContext(ctx context.Context) *QueryOptions {
	out := QueryOptions{}
	if o != nil {
		out = *o
	}
	out.ctx = ctx
	return &out
}

// QueryMeta comes back with reads.
type QueryMeta struct {
	LastIndex   uint64
	LastContact time.Duration
	KnownLeader bool
	NextToken   string
	RequestTime time.Duration
}

// WriteOptions are the options writes take.
type WriteOptions struct {
	Namespace string
	Params    map[string]string
	ctx       context.Context
}

// WithContext returns a copy that uses ctx for the request.
func (o *WriteOptions) WithContext(ctx context.Context) *WriteOptions {
	out := WriteOptions{}
	if o != nil {
		out = *o
	}
	out.ctx = ctx
	return &out
}

// WriteMeta comes back with writes.
type WriteMeta struct {
	LastIndex   uint64
	RequestTime time.Duration
}

// StatusError is a non-2xx answer: the status and the plain-text body.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("Unexpected response code: %d (%s)", e.Code, strings.TrimSpace(e.Body))
}

// IsNotFound reports whether err is a 404 answer.
func IsNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}

func (c *Client) newRequest(ctx context.Context, method, path string, params url.Values, body any) (*http.Request, error) {
	u := *c.baseURL
	// path comes escaped (IDs through url.PathEscape): keep it as sent,
	// so an ID holding "/" or "?" stays one path element.
	unescaped, err := url.PathUnescape(path)
	if err != nil {
		return nil, fmt.Errorf("request path %q: %w", path, err)
	}
	u.Path, u.RawPath = unescaped, path
	u.RawQuery = params.Encode()
	var r io.Reader
	if body != nil {
		if rd, ok := body.(io.Reader); ok {
			r = rd
		} else if rb, ok := body.(requestBody); ok {
			b, err := rb.requestJSON()
			if err != nil {
				return nil, fmt.Errorf("encoding request body: %w", err)
			}
			r = bytes.NewReader(b)
		} else {
			b, err := json.Marshal(body)
			if err != nil {
				return nil, fmt.Errorf("encoding request body: %w", err)
			}
			r = bytes.NewReader(b)
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		return nil, err
	}
	if c.config.Token != "" {
		req.Header.Set("X-Nomad-Token", c.config.Token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// requestBody is a request body that writes its own JSON, which any JSON
// decoder reads as it would encoding/json's (a volume register:
// CSIVolumeRegisterRequest).
type requestBody interface {
	requestJSON() ([]byte, error)
}

// rawDecoder is an answer that decodes its whole body itself (a big list
// with a decoder of its own, see volumeStubList). The body is the
// decoder's: the result may share its memory, and nothing writes it
// after decodeJSON.
type rawDecoder interface {
	decodeJSON(body []byte) error
}

func (c *Client) do(req *http.Request, out any) (*http.Response, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return resp, &StatusError{Code: resp.StatusCode, Body: string(b)}
	}
	if rd, ok := out.(rawDecoder); ok {
		var buf bytes.Buffer
		if resp.ContentLength > 0 && resp.ContentLength < 64<<20 {
			buf.Grow(int(resp.ContentLength))
		}
		_, err := buf.ReadFrom(resp.Body)
		b := buf.Bytes()
		if err == nil {
			err = rd.decodeJSON(b)
		}
		if err != nil {
			return resp, fmt.Errorf("decoding response of %s %s: %w", req.Method, req.URL.Path, err)
		}
		return resp, nil
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp, fmt.Errorf("decoding response of %s %s: %w", req.Method, req.URL.Path, err)
		}
	}
	return resp, nil
}

func (c *Client) queryParams(q *QueryOptions) url.Values {
	v := url.Values{}
	ns := c.config.Namespace
	if q != nil {
		if q.Namespace != "" {
			ns = q.Namespace
		}
		if q.AllowStale {
			v.Set("stale", "")
		}
		if q.WaitIndex > 0 {
			v.Set("index", strconv.FormatUint(q.WaitIndex, 10))
		}
		if q.WaitTime > 0 {
			v.Set("wait", q.WaitTime.String())
		}
		if q.Prefix != "" {
			v.Set("prefix", q.Prefix)
		}
		if q.Filter != "" {
			v.Set("filter", q.Filter)
		}
		if q.PerPage > 0 {
			v.Set("per_page", strconv.Itoa(int(q.PerPage)))
		}
		if q.NextToken != "" {
			v.Set("next_token", q.NextToken)
		}
		for k, val := range q.Params {
			v.Set(k, val)
		}
	}
	if ns != "" {
		v.Set("namespace", ns)
	}
	return v
}

// query does a GET and decodes the answer into out.
func (c *Client) query(path string, out any, q *QueryOptions) (*QueryMeta, error) {
	var ctx context.Context
	if q != nil {
		ctx = q.ctx
	}
	req, err := c.newRequest(ctx, http.MethodGet, path, c.queryParams(q), nil)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := c.do(req, out)
	if err != nil {
		return nil, err
	}
	qm := parseQueryMeta(resp)
	qm.RequestTime = time.Since(start)
	return qm, nil
}

func parseQueryMeta(resp *http.Response) *QueryMeta {
	qm := &QueryMeta{}
	qm.LastIndex, _ = strconv.ParseUint(resp.Header.Get("X-Nomad-Index"), 10, 64)
	ms, _ := strconv.ParseInt(resp.Header.Get("X-Nomad-LastContact"), 10, 64)
	qm.LastContact = time.Duration(ms) * time.Millisecond
	qm.KnownLeader = resp.Header.Get("X-Nomad-KnownLeader") == "true"
	qm.NextToken = resp.Header.Get("X-Nomad-NextToken")
	return qm
}

// write sends method with an optional JSON body and decodes into out.
func (c *Client) write(method, path string, body, out any, w *WriteOptions) (*WriteMeta, error) {
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
	start := time.Now()
	resp, err := c.do(req, out)
	if err != nil {
		return nil, err
	}
	wm := &WriteMeta{RequestTime: time.Since(start)}
	wm.LastIndex, _ = strconv.ParseUint(resp.Header.Get("X-Nomad-Index"), 10, 64)
	return wm, nil
}
