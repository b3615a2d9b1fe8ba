// Package ui serves Berth's web UI at /ui/ from files embedded in the
// binary: no separate server, nothing downloaded at run time.
//
// The server renders only a page shell (html/template: the navigation and
// which page, plus the ID from the URL) and never reads cluster state, so a
// page cannot show anything to a caller the API would refuse. A small
// vanilla script (assets/app.js) fetches the agent's own HTTP API with the
// ACL token the operator entered once (kept in sessionStorage, sent as
// X-Nomad-Token), renders the tables, and keeps each page live with
// blocking queries (?index=N&wait=), the same mechanism the CLI's watchers
// use. No build step, no npm: the assets are the files in assets/.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"sync"
)

//go:embed assets
var assets embed.FS

// Prefix is where the UI is served.
const Prefix = "/ui/"

// pages are the list pages and, for each, the detail page its rows link to
// ("" when rows do not link anywhere). The order is the navigation's.
var pages = []struct{ List, Detail, Title string }{
	{"volumes", "volume", "Volumes"},
	{"jobs", "job", "Jobs"},
	{"allocs", "alloc", "Allocations"},
	{"nodes", "node", "Nodes"},
	{"plugins", "plugin", "Plugins"},
}

// shell is parsed at its first use, not in package init: every start of
// the berth binary (the CLI's included) would pay for it.
var shell = sync.OnceValue(func() *template.Template {
	return template.Must(template.ParseFS(assets, "assets/shell.html"))
})

// shellData is all the server puts into a page.
type shellData struct {
	Page    string // a list page ("volumes") or a detail page ("volume")
	ID      string // the object's ID on a detail page, as the URL gave it
	Title   string
	Nav     []navItem
	Version string // the assets' hash, so a new binary's assets are not cached stale
}

type navItem struct {
	Href, Title string
	Active      bool
}

// Handler serves the UI under Prefix. It holds no reference to the agent:
// everything it shows comes from the API, fetched by the browser with the
// caller's token.
func Handler() http.Handler {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(fmt.Sprintf("ui: embedded assets: %v", err))
	}
	version := assetsVersion()
	files := http.StripPrefix(Prefix+"static/", http.FileServerFS(static))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path), http.StatusMethodNotAllowed)
			return
		}
		setSecurityHeaders(w)
		rest := strings.TrimPrefix(r.URL.Path, Prefix)
		if strings.HasPrefix(rest, "static/") {
			if rest == "static/shell.html" {
				http.NotFound(w, r)
				return
			}
			// Asset URLs carry ?v=<hash>, so they may be cached for good.
			if r.URL.Query().Get("v") == version {
				w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
			} else {
				w.Header().Set("Cache-Control", "no-cache")
			}
			files.ServeHTTP(w, r)
			return
		}
		if rest == "" {
			http.Redirect(w, r, Prefix+"volumes", http.StatusFound)
			return
		}
		data, ok := route(rest)
		if !ok {
			http.Error(w, fmt.Sprintf("no UI page %s: the pages are %s", r.URL.Path, pageList()), http.StatusNotFound)
			return
		}
		data.Version = version
		var buf bytes.Buffer
		if err := shell().Execute(&buf, data); err != nil {
			http.Error(w, "ui: rendering the page: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(buf.Bytes())
	})
}

// route maps "volumes" or "volume/<id>" to the shell's data.
func route(rest string) (shellData, bool) {
	kind, id, detail := strings.Cut(rest, "/")
	var d shellData
	for _, p := range pages {
		d.Nav = append(d.Nav, navItem{Href: Prefix + p.List, Title: p.Title})
	}
	for i, p := range pages {
		switch {
		case !detail && kind == p.List:
			d.Page, d.Title = p.List, p.Title
		case detail && kind == p.Detail && id != "":
			d.Page, d.ID, d.Title = p.Detail, id, strings.TrimSuffix(p.Title, "s")+" "+id
		default:
			continue
		}
		d.Nav[i].Active = true
		return d, true
	}
	return shellData{}, false
}

func pageList() string {
	var names []string
	for _, p := range pages {
		names = append(names, Prefix+p.List)
	}
	return strings.Join(names, ", ")
}

// setSecurityHeaders: scripts and styles only from the agent itself (no
// inline script, so injected markup cannot run), no framing, no referrer
// leaking volume IDs elsewhere.
func setSecurityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// assetsVersion hashes every embedded file.
func assetsVersion() string {
	sum := sha256.New()
	fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(sum, "%s\x00%d\x00", path, len(b))
		sum.Write(b)
		return nil
	})
	return hex.EncodeToString(sum.Sum(nil))[:12]
}
