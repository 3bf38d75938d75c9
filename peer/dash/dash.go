// Package dash is needle's web dashboard: a small page, served by every peer
// at "/", to watch and operate the mesh from. The overview shows the peers,
// their load, the partitions this peer leads, a throughput chart, tasks per
// handler, the groups the user tracks with their progress and a DAG view of
// one group. Hash routes open the other views: #groups and #failed (the
// mesh-wide lists with filters, cursor paging, cancel and retry),
// #task=ID (history, actions, logs followed live), #schedules (pause,
// resume, trigger), #audit and #workers. It refreshes live by polling the
// peer's own HTTP API (docs/api.md) from the browser and asks for the API
// token when the peer answers 401.
//
// static/app.js holds the core (polling, the overview, a task and its
// logs) and exports its helpers to static/views.js, which holds the other
// views. The browser test of every view is browser_test.go (build tag
// browser, run by .ci/dashboard-test.sh).
//
// The assets are embedded; nothing is loaded from outside the peer, and the
// Content-Security-Policy forbids it.
package dash

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy every dashboard response carries: only
// same-origin scripts, styles, images and fetches; no inline script, no
// frames, no plugins.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
}

type asset struct {
	body  []byte
	ctype string
	etag  string
}

// assets reads the embedded files once; their ETags let browsers revalidate
// cheaply (Cache-Control: no-cache) so a peer upgrade shows at once.
func assets() map[string]asset {
	out := map[string]asset{}
	entries, err := fs.ReadDir(static, "static")
	if err != nil {
		panic(err) // the embed directive guarantees the directory
	}
	for _, e := range entries {
		ctype, ok := types[path.Ext(e.Name())]
		if e.IsDir() || !ok {
			continue
		}
		body, err := fs.ReadFile(static, "static/"+e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(body)
		out[e.Name()] = asset{body: body, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return out
}

// Handler serves the dashboard: the page at "/" (also "/index.html" and
// "/dash/") and its assets under "/dash/" (e.g. "/dash/app.js"). Mount it on
// "GET /{$}" and "GET /dash/". Anything else is a 404.
func Handler() http.Handler {
	files := assets()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		var name string
		switch p := r.URL.Path; {
		case p == "/" || p == "/index.html" || p == "/dash/":
			name = "index.html"
		case strings.HasPrefix(p, "/dash/"):
			name = strings.TrimPrefix(p, "/dash/")
		default:
			http.NotFound(w, r)
			return
		}
		a, ok := files[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.ctype)
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
	})
}
