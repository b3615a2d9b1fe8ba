package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/shoenig/test/must"
)

// chromium finds a Chromium binary: $BERTH_CHROMIUM, else the
// distribution's. Without one the caller skips, saying how to get it.
func chromium(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("BERTH_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	tb.Skip("no chromium binary (looked for chromium, chromium-browser, google-chrome on PATH and $BERTH_CHROMIUM): run `make browser` as root, which apt-get installs Debian's chromium")
	return ""
}

// browser starts a headless Chromium for the test.
func browser(tb testing.TB) context.Context {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(tb)), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	tb.Cleanup(func() { cancelC(); cancelA() })
	must.NoError(tb, chromedp.Run(ctx), must.Sprint("starting chromium"))
	return ctx
}

// fakeVolumes is an agent stand-in for the page's one API call: the UI
// handler beside a /v1/volumes answering n list stubs, so the benchmark
// measures the page, not the server's list.
func fakeVolumes(tb testing.TB, n int) *httptest.Server {
	stubs := make([]map[string]any, n)
	for i := range stubs {
		stubs[i] = map[string]any{"ID": fmt.Sprintf("vol-%04d", i), "Name": fmt.Sprintf("data %d", i),
			"PluginID": "hostpath", "State": "ready", "Schedulable": true, "Claims": i % 3,
			"AccessMode": "single-node-writer", "NodesHealthy": 3, "NodesExpected": 3}
	}
	body, err := json.Marshal(stubs)
	must.NoError(tb, err)
	mux := http.NewServeMux()
	mux.Handle(Prefix, Handler())
	mux.HandleFunc("/v1/volumes", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("index") != "" { // a blocking query: nothing changes
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Nomad-Index", "7")
		w.Write(body)
	})
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	return srv
}

// paintTimes reads, from the page's own clock, when the first paint
// happened and when the list was rendered (ms since navigation start).
type paintTimes struct{ FCP, Rendered float64 }

const paintJS = `({FCP: (performance.getEntriesByName("first-contentful-paint")[0] || {startTime: -1}).startTime,
 Rendered: (performance.getEntriesByName("berth:rendered")[0] || {startTime: -1}).startTime})`

// BenchmarkVolumeList1000 loads /ui/volumes over 1,000 volumes in headless
// Chromium and reports the page's first contentful paint and the moment
// all 1,000 rows were in the DOM, both from navigation start.
func BenchmarkVolumeList1000(b *testing.B) {
	srv := fakeVolumes(b, 1000)
	ctx := browser(b) // closed first: its open blocking query would hold srv.Close
	var fcp, rendered float64
	b.ResetTimer()
	for range b.N {
		var p paintTimes
		err := chromedp.Run(ctx,
			chromedp.Navigate(srv.URL+"/ui/volumes"),
			chromedp.WaitVisible(`body[data-rendered="1000"]`, chromedp.ByQuery),
			chromedp.Evaluate(paintJS, &p))
		must.NoError(b, err)
		must.Positive(b, p.Rendered, must.Sprint("the page never marked berth:rendered"))
		fcp += p.FCP
		rendered += p.Rendered
	}
	b.ReportMetric(fcp/float64(b.N), "fcp-ms")
	b.ReportMetric(rendered/float64(b.N), "rendered-ms")
}

// TestVolumeListRendersInBrowser: the list page shows every volume in a
// real browser, with rows that link to the volume page.
func TestVolumeListRendersInBrowser(t *testing.T) {
	srv := fakeVolumes(t, 1000)
	ctx := browser(t)
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var rows int
	var href string
	err := chromedp.Run(ctx,
		chromedp.Navigate(srv.URL+"/ui/volumes"),
		chromedp.WaitVisible(`body[data-rendered="1000"]`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll("tbody tr[data-volume]").length`, &rows),
		chromedp.Evaluate(`document.querySelector('tr[data-volume="vol-0042"] a').getAttribute("href")`, &href))
	must.NoError(t, err)
	must.Eq(t, 1000, rows)
	must.Eq(t, "/ui/volume/vol-0042", href)
}

// TestTokenInBrowser: without a token the page shows the API's refusal
// and no data; a token entered once is kept for the tab (it survives a
// reload) and sent as X-Nomad-Token; Forget drops it and what it showed.
func TestTokenInBrowser(t *testing.T) {
	const secret = "5f0c6c1e-0e1a-4d7b-9d55-token-ui"
	var sawToken atomic.Bool
	mux := http.NewServeMux()
	mux.Handle(Prefix, Handler())
	mux.HandleFunc("/v1/volumes", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Nomad-Token") != secret {
			http.Error(w, "Permission denied: token lacks csi-list-volume in namespace default", http.StatusForbidden)
			return
		}
		sawToken.Store(true)
		if r.URL.Query().Get("index") != "" {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Nomad-Index", "3")
		w.Write([]byte(`[{"ID":"secret-vol","Name":"s","PluginID":"p","NodesHealthy":1,"NodesExpected":1}]`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx := browser(t)
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()

	var status string
	var rows int
	must.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(srv.URL+"/ui/volumes"),
		chromedp.WaitVisible(`#status.error`, chromedp.ByQuery),
		chromedp.Text(`#status`, &status, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll("tr[data-volume]").length`, &rows)))
	must.StrContains(t, status, "permission denied")
	must.StrContains(t, status, "token lacks csi-list-volume")
	must.Eq(t, 0, rows)
	must.False(t, sawToken.Load())

	var kept string
	must.NoError(t, chromedp.Run(ctx,
		chromedp.SendKeys(`#token`, secret, chromedp.ByQuery),
		chromedp.Click(`#token-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`tr[data-volume="secret-vol"]`, chromedp.ByQuery),
		chromedp.Reload(),
		chromedp.WaitVisible(`tr[data-volume="secret-vol"]`, chromedp.ByQuery),
		chromedp.Evaluate(`sessionStorage.getItem("berth.token")`, &kept),
		chromedp.Evaluate(`localStorage.length`, &rows)))
	must.True(t, sawToken.Load())
	must.Eq(t, secret, kept)
	must.Eq(t, 0, rows, must.Sprint("the token must not outlive the tab (localStorage)"))

	must.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`#token-clear`, chromedp.ByQuery),
		chromedp.WaitVisible(`#status.error`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll("tr[data-volume]").length`, &rows)))
	must.Eq(t, 0, rows, must.Sprint("Forget left the token's data on screen"))
}
