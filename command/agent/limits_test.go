package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/nomad/structs"
)

func put(t *testing.T, a *Agent, path string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, "http://"+a.HTTPAddr()+path, body)
	must.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	must.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must.NoError(t, err)
	return resp.StatusCode, string(b)
}

func jobBody(t *testing.T, job *api.Job) []byte {
	t.Helper()
	b, err := json.Marshal(api.JobRegisterRequest{Job: job})
	must.NoError(t, err)
	return b
}

func TestHTTPLimits_Body(t *testing.T) {
	a := newDevAgent(t)
	a.http.maxBody = 1 << 20

	// Over the limit, with and without a Content-Length.
	big := append([]byte(`{"Job":{"ID":"`), bytes.Repeat([]byte("x"), 2<<20)...)
	code, msg := put(t, a, "/v1/jobs", bytes.NewReader(big))
	must.Eq(t, http.StatusRequestEntityTooLarge, code)
	must.StrContains(t, msg, "larger than the limit of 1048576 bytes")
	must.StrContains(t, msg, "limits.http_max_body_bytes")
	code, msg = put(t, a, "/v1/jobs", io.MultiReader(bytes.NewReader(big))) // chunked
	must.Eq(t, http.StatusRequestEntityTooLarge, code)
	must.StrContains(t, msg, "1048576")

	// Under it, the request goes through.
	code, msg = put(t, a, "/v1/jobs", bytes.NewReader(jobBody(t, sparseJob("small"))))
	must.Eq(t, http.StatusOK, code, must.Sprint(msg))
}

func TestHTTPLimits_JSONDepth(t *testing.T) {
	a := newDevAgent(t)
	job := sparseJob("deep")
	deep := strings.Repeat(`{"a":`, 9000) + "1" + strings.Repeat("}", 9000)
	body := bytes.Replace(jobBody(t, job), []byte(`"command":"/bin/sleep"`), []byte(`"command":"/bin/sleep","deep":`+deep), 1)
	code, msg := put(t, a, "/v1/jobs", bytes.NewReader(body))
	must.Eq(t, http.StatusBadRequest, code)
	must.StrContains(t, msg, "nests deeper than 64 levels")

	// Brackets inside strings do not count.
	job.Meta = map[string]string{"brackets": strings.Repeat("[{", 1000)}
	code, msg = put(t, a, "/v1/jobs", bytes.NewReader(jobBody(t, job)))
	must.Eq(t, http.StatusOK, code, must.Sprint(msg))
}

func TestJSONDepth(t *testing.T) {
	cases := []struct {
		in   string
		want int
	}{
		{`1`, 0},
		{`{}`, 1},
		{`{"a":[{"b":[]}]}`, 4},
		{`{"a":"}}}{{{{"}`, 1},
		{`{"a":"\"{{{"}`, 1},
		{`[[[`, 3},
	}
	for _, tc := range cases {
		must.Eq(t, tc.want, jsonDepth([]byte(tc.in)), must.Sprint(tc.in))
	}
}

// jsonDepthBytewise is jsonDepth as it was, one byte at a time: the
// reference the quote search is held to.
func jsonDepthBytewise(buf []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, b := range buf {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
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

// On bodies made of quotes, backslashes and brackets, in every order up
// to length 6 and at random beyond, jsonDepth counts as the byte-wise scan.
func TestJSONDepth_LikeBytewise(t *testing.T) {
	const alphabet = `"\\[]{}a`
	var all func(prefix []byte, n int)
	all = func(prefix []byte, n int) {
		must.Eq(t, jsonDepthBytewise(prefix), jsonDepth(prefix), must.Sprintf("%q", prefix))
		if n == 0 {
			return
		}
		for i := range len(alphabet) {
			all(append(prefix, alphabet[i]), n-1)
		}
	}
	all(nil, 6)
	rng := rand.New(rand.NewPCG(20, 20))
	for range 20000 {
		b := make([]byte, rng.IntN(300))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		must.Eq(t, jsonDepthBytewise(b), jsonDepth(b), must.Sprintf("%q", b))
	}
}

// TestHTTPLimits_TrickledBody: a client sending its body a byte at a
// time is cut off at the body deadline with a 408.
func TestHTTPLimits_TrickledBody(t *testing.T) {
	a := newDevAgent(t)
	a.http.bodyTimeout = 200 * time.Millisecond
	conn, err := net.Dial("tcp", a.HTTPAddr())
	must.NoError(t, err)
	defer conn.Close()
	fmt.Fprintf(conn, "PUT /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
	// Send no more; the server answers without waiting for the rest.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufioReader(conn), nil)
	must.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	must.Eq(t, http.StatusRequestTimeout, resp.StatusCode)
	must.StrContains(t, string(b), "send it at once")
}

func TestHTTPLimits_CountAndGroups(t *testing.T) {
	a := newDevAgent(t)
	job := sparseJob("huge")
	job.TaskGroups[0].Count = ptr(1 << 31)
	code, msg := put(t, a, "/v1/jobs", bytes.NewReader(jobBody(t, job)))
	must.Eq(t, http.StatusBadRequest, code)
	must.StrContains(t, msg, fmt.Sprintf("count 2147483648 is over the limit of %d per group", structs.MaxGroupCount))

	job = sparseJob("wide")
	for i := range structs.MaxTaskGroups {
		tg := *sparseJob("x").TaskGroups[0]
		tg.Name = ptr(fmt.Sprintf("g%d", i))
		job.TaskGroups = append(job.TaskGroups, &tg)
	}
	code, msg = put(t, a, "/v1/jobs", bytes.NewReader(jobBody(t, job)))
	must.Eq(t, http.StatusBadRequest, code)
	must.StrContains(t, msg, fmt.Sprintf("101 task groups is over the limit of %d", structs.MaxTaskGroups))
}

func TestHTTPLimits_VolumesPerRequest(t *testing.T) {
	a := newDevAgent(t)
	var req api.CSIVolumeRegisterRequest
	for i := range structs.MaxItemsPerRequest + 1 {
		req.Volumes = append(req.Volumes, &api.CSIVolume{ID: fmt.Sprintf("v%d", i), PluginID: "p"})
	}
	b, err := json.Marshal(req)
	must.NoError(t, err)
	code, msg := put(t, a, "/v1/volume/csi/v0", bytes.NewReader(b))
	must.Eq(t, http.StatusBadRequest, code)
	must.StrContains(t, msg, "1001 volumes, over the limit of 1000")
}

func TestHTTPLimits_ErrorSize(t *testing.T) {
	a := newDevAgent(t)
	code, msg := put(t, a, "/v1/no-such-"+strings.Repeat("x", 100_000), nil)
	must.Eq(t, http.StatusNotFound, code)
	must.Less(t, maxErrorBytes+100, len(msg))
	must.StrContains(t, msg, "bytes of error truncated")
}

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }

// TestHTTP_UnsafeNamesRefused: the task named ../x and job ID
// with / are refused with 400s naming the field.
func TestHTTP_UnsafeNamesRefused(t *testing.T) {
	a := newDevAgent(t)
	job := sparseJob("ok")
	job.TaskGroups[0].Tasks[0].Name = "../x"
	code, msg := put(t, a, "/v1/jobs", bytes.NewReader(jobBody(t, job)))
	must.Eq(t, http.StatusBadRequest, code)
	must.StrContains(t, msg, `task name "../x" must not contain / or \`)

	code, msg = put(t, a, "/v1/jobs", bytes.NewReader(jobBody(t, sparseJob("a/b"))))
	must.Eq(t, http.StatusBadRequest, code)
	must.StrContains(t, msg, `job ID "a/b" must not contain / or \`)

	code, msg = put(t, a, "/v1/jobs", bytes.NewReader(jobBody(t, sparseJob("a\nb"))))
	must.Eq(t, http.StatusBadRequest, code)
	must.StrContains(t, msg, "control characters")
}

// TestHTTP_TaskUserRoundTrips: the task's user reaches the servers and
// comes back.
func TestHTTP_TaskUserRoundTrips(t *testing.T) {
	a := newDevAgent(t)
	job := sparseJob("user")
	job.TaskGroups[0].Tasks[0].User = "root"
	code, msg := put(t, a, "/v1/jobs", bytes.NewReader(jobBody(t, job)))
	must.Eq(t, http.StatusOK, code, must.Sprint(msg))
	got, _ := decode[api.Job](t, a, http.MethodGet, "/v1/job/user", nil)
	must.Eq(t, "root", got.TaskGroups[0].Tasks[0].User)
}

// A handler takes the body readBody read, not a second copy of it, and
// that buffer was sized once from the Content-Length.
func TestReadBody_HandlerTakesItsBuffer(t *testing.T) {
	body := strings.Repeat(`{"Volumes":[]}`, 1000)
	r := httptest.NewRequest(http.MethodPut, "/v1/volume/csi/x", strings.NewReader(body))
	must.Eq(t, int64(len(body)), r.ContentLength)
	must.NoError(t, readBody(httptest.NewRecorder(), r, 1<<20, time.Minute))
	rb, ok := r.Body.(*readBodyBuf)
	must.True(t, ok, must.Sprintf("readBody left a %T", r.Body))
	// One allocation for the buffer, where io.ReadAll grows one through
	// the body (13 allocations for this one).
	rd := strings.NewReader(body)
	allocs := testing.AllocsPerRun(20, func() {
		rd.Reset(body)
		if _, err := readAll(rd, int64(len(body)), 1<<20); err != nil {
			t.Fatal(err)
		}
	})
	must.LessEq(t, 2, allocs)

	got, err := bodyBytes(r)
	must.NoError(t, err)
	must.Eq(t, body, string(got))
	must.True(t, &got[0] == &rb.buf[0], must.Sprint("bodyBytes copied the body"))

	// Once a handler has read some of it, the rest is read as before.
	r.Body = &readBodyBuf{Reader: bytes.NewReader(rb.buf), buf: rb.buf}
	_, err = io.ReadFull(r.Body, make([]byte, 3))
	must.NoError(t, err)
	got, err = bodyBytes(r)
	must.NoError(t, err)
	must.Eq(t, body[3:], string(got))
}

// readAll reads the whole body whatever the Content-Length claims.
func TestReadAll_LengthIsOnlyAHint(t *testing.T) {
	for _, cl := range []int64{-1, 0, 3, 10, 11, 1 << 30} {
		got, err := readAll(strings.NewReader("0123456789"), cl, 1<<20)
		must.NoError(t, err)
		must.Eq(t, "0123456789", string(got), must.Sprintf("Content-Length %d", cl))
	}
}

// go test -run '^$' -bench JSONDepth ./command/agent/
func BenchmarkJSONDepth(b *testing.B) {
	vols := make([]*api.CSIVolume, 1000)
	for i := range vols {
		vols[i] = apiVolume(fmt.Sprintf("vol-%04d", i), "hostpath")
	}
	body, err := json.Marshal(api.CSIVolumeRegisterRequest{Volumes: vols})
	must.NoError(b, err)
	b.SetBytes(int64(len(body)))
	b.Run("bytewise", func(b *testing.B) {
		for b.Loop() {
			jsonDepthBytewise(body)
		}
	})
	b.Run("quote-search", func(b *testing.B) {
		for b.Loop() {
			jsonDepth(body)
		}
	})
}
