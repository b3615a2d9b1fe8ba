package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

func get(t *testing.T, h http.Handler, method, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	res := rec.Result()
	b, err := io.ReadAll(res.Body)
	must.NoError(t, err)
	return res, string(b)
}

// TestShell: every page is a shell that names its page and loads the
// script; the server puts no cluster data in it (it has none to put).
func TestShell(t *testing.T) {
	h := Handler()
	for _, p := range pages {
		res, body := get(t, h, http.MethodGet, "/ui/"+p.List)
		must.Eq(t, http.StatusOK, res.StatusCode, must.Sprint(p.List))
		must.StrContains(t, body, `data-page="`+p.List+`"`)
		must.StrContains(t, body, `class="active">`+p.Title+`</a>`)
		must.StrContains(t, body, `<script src="/ui/static/app.js?v=`+assetsVersion()+`"`)
		must.StrContains(t, res.Header.Get("Content-Security-Policy"), "script-src 'self'")

		res, body = get(t, h, http.MethodGet, "/ui/"+p.Detail+"/abc-123")
		must.Eq(t, http.StatusOK, res.StatusCode, must.Sprint(p.Detail))
		must.StrContains(t, body, `data-page="`+p.Detail+`" data-id="abc-123"`)
	}
	res, _ := get(t, h, http.MethodGet, "/ui/")
	must.Eq(t, http.StatusFound, res.StatusCode)
	must.Eq(t, "/ui/volumes", res.Header.Get("Location"))
}

// TestShellEscapesTheID: the one caller-supplied value in a page is
// escaped, so a crafted link cannot inject markup or script.
func TestShellEscapesTheID(t *testing.T) {
	_, body := get(t, Handler(), http.MethodGet, `/ui/volume/x"><script>alert(1)</script>`)
	must.StrNotContains(t, body, "<script>alert(1)")
	must.StrContains(t, body, `data-id="x&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"`)
}

func TestUnknownPagesAndMethods(t *testing.T) {
	h := Handler()
	for _, path := range []string{"/ui/nope", "/ui/volume/", "/ui/volumes/x", "/ui/static/shell.html"} {
		res, body := get(t, h, http.MethodGet, path)
		must.Eq(t, http.StatusNotFound, res.StatusCode, must.Sprint(path))
		if !strings.HasPrefix(path, "/ui/static/") {
			must.StrContains(t, body, "/ui/volumes, /ui/jobs", must.Sprint(path))
		}
	}
	res, body := get(t, h, http.MethodPost, "/ui/volumes")
	must.Eq(t, http.StatusMethodNotAllowed, res.StatusCode)
	must.StrContains(t, body, "method POST not allowed on /ui/volumes")
}

// TestStatic: the assets come from the binary; versioned URLs may be
// cached for good, others must be revalidated.
func TestStatic(t *testing.T) {
	h := Handler()
	res, body := get(t, h, http.MethodGet, "/ui/static/app.js?v="+assetsVersion())
	must.Eq(t, http.StatusOK, res.StatusCode)
	must.StrContains(t, res.Header.Get("Content-Type"), "javascript")
	must.StrContains(t, body, "X-Nomad-Token")
	must.StrContains(t, res.Header.Get("Cache-Control"), "immutable")
	res, _ = get(t, h, http.MethodGet, "/ui/static/app.css?v=old")
	must.Eq(t, http.StatusOK, res.StatusCode)
	must.Eq(t, "no-cache", res.Header.Get("Cache-Control"))
}

// TestScriptNeverUsesInnerHTML: the script builds the DOM with textContent
// only, so API data (volume names, errors) cannot become markup.
func TestScriptNeverUsesInnerHTML(t *testing.T) {
	b, err := assets.ReadFile("assets/app.js")
	must.NoError(t, err)
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
		must.StrNotContains(t, string(b), bad)
	}
}
