package dash

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestIndex(t *testing.T) {
	h := Handler()
	for _, p := range []string{"/", "/index.html", "/dash/"} {
		rec := get(t, h, "GET", p)
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d", p, rec.Code)
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("GET %s: Content-Type %q", p, ct)
		}
		csp := rec.Header().Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("GET %s: CSP %q", p, csp)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", p)
		}
		body := rec.Body.String()
		for _, want := range []string{`<script src="/dash/app.js"`, `<script src="/dash/views.js"`, `href="/dash/style.css"`,
			`id="peers"`, `id="groups"`, `id="dag"`, `id="events"`, `id="logs"`, `id="list"`, `id="schedules"`,
			`id="audit"`, `id="workers"`, `id="chart"`, `id="token-dialog"`,
			`href="#groups"`, `href="#failed"`, `href="#schedules"`, `href="#audit"`, `href="#workers"`} {
			if !strings.Contains(body, want) {
				t.Errorf("index lacks %s", want)
			}
		}
	}
}

func TestAssets(t *testing.T) {
	h := Handler()
	for path, ctype := range map[string]string{
		"/dash/app.js":     "text/javascript",
		"/dash/views.js":   "text/javascript",
		"/dash/style.css":  "text/css",
		"/dash/index.html": "text/html",
	} {
		rec := get(t, h, "GET", path)
		if rec.Code != 200 || rec.Body.Len() == 0 {
			t.Fatalf("GET %s: %d, %d bytes", path, rec.Code, rec.Body.Len())
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, ctype) {
			t.Errorf("GET %s: Content-Type %q, want %s", path, ct, ctype)
		}
		if rec.Header().Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s: no CSP", path)
		}
		etag := rec.Header().Get("ETag")
		if etag == "" {
			t.Fatalf("GET %s: no ETag", path)
		}
		if rec := get(t, h, "GET", path, "If-None-Match", etag); rec.Code != http.StatusNotModified {
			t.Errorf("GET %s with If-None-Match: %d", path, rec.Code)
		}
	}
	if rec := get(t, h, "HEAD", "/dash/app.js"); rec.Code != 200 || rec.Body.Len() != 0 {
		t.Errorf("HEAD: %d, %d bytes", rec.Code, rec.Body.Len())
	}
}

func TestNotFound(t *testing.T) {
	h := Handler()
	for _, p := range []string{"/dash/nope.js", "/dash/../dash.go", "/dash/static/app.js", "/dash/dash.go", "/other", "/dash/x/app.js"} {
		rec := get(t, h, "GET", p)
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, rec.Code)
		}
	}
	if rec := get(t, h, "POST", "/"); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d", rec.Code)
	}
}

// TestSameOrigin: the page loads nothing from outside the peer. No asset
// names a scheme-qualified or protocol-relative URL, and the HTML references
// only /dash/ assets and the page's own views (#groups); there is no inline
// script or style (the CSP forbids them).
func TestSameOrigin(t *testing.T) {
	entries, err := fs.ReadDir(static, "static")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 {
		t.Errorf("want index.html, app.js, views.js and style.css; have %d files", len(entries))
	}
	external := regexp.MustCompile(`(?i)(https?:|wss?:|ftp:)//|["'(=]\s*//[a-z0-9]|@import`)
	for _, e := range entries {
		b, err := fs.ReadFile(static, "static/"+e.Name())
		if err != nil {
			t.Fatal(err)
		}
		if m := external.Find(b); m != nil {
			t.Errorf("%s references something external: %q", e.Name(), m)
		}
	}
	html, _ := fs.ReadFile(static, "static/index.html")
	refs := regexp.MustCompile(`(?i)(?:src|href)\s*=\s*"([^"]*)"`).FindAllSubmatch(html, -1)
	if len(refs) == 0 {
		t.Fatal("no references in index.html")
	}
	for _, m := range refs {
		ref := string(m[1])
		if !strings.HasPrefix(ref, "/dash/") && !strings.HasPrefix(ref, "#") && ref != "data:," {
			t.Errorf("index.html references %q", ref)
		}
	}
	if regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]`).Match(html) {
		t.Error("inline script in index.html")
	}
	if regexp.MustCompile(`(?i)<style|\sstyle\s*=|\son[a-z]+\s*=`).Match(html) {
		t.Error("inline style or event handler attribute in index.html")
	}
}

// TestEveryAssetServed: every embedded file is served under /dash/ with the
// content type of its extension, and every file index.html names is there.
func TestEveryAssetServed(t *testing.T) {
	h := Handler()
	entries, err := fs.ReadDir(static, "static")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		want, ok := types[path.Ext(e.Name())]
		if !ok {
			t.Errorf("%s: no content type for its extension", e.Name())
			continue
		}
		rec := get(t, h, "GET", "/dash/"+e.Name())
		if rec.Code != 200 || rec.Header().Get("Content-Type") != want {
			t.Errorf("GET /dash/%s: %d %q; want 200 %q", e.Name(), rec.Code, rec.Header().Get("Content-Type"), want)
		}
	}
	html, _ := fs.ReadFile(static, "static/index.html")
	for _, m := range regexp.MustCompile(`(?:src|href)="(/dash/[^"]+)"`).FindAllSubmatch(html, -1) {
		if rec := get(t, h, "GET", string(m[1])); rec.Code != 200 {
			t.Errorf("index.html names %s: GET answers %d", m[1], rec.Code)
		}
	}
}

// TestNoOtherHosts: no static file names a URL on another host (http,
// https, ws, wss, or protocol-relative), whatever the context: the page
// must work with no network but the peer's.
func TestNoOtherHosts(t *testing.T) {
	url := regexp.MustCompile(`(?i)\b(?:https?|wss?):\/\/[^\s"'<>)]*`)
	entries, _ := fs.ReadDir(static, "static")
	for _, e := range entries {
		b, _ := fs.ReadFile(static, "static/"+e.Name())
		for _, m := range url.FindAll(b, -1) {
			t.Errorf("%s names %q", e.Name(), m)
		}
	}
}

// TestRoutesUsed: every API path the scripts call is a route of
// docs/openapi.yaml, so the dashboard cannot drift from the API.
func TestRoutesUsed(t *testing.T) {
	spec, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, m := range regexp.MustCompile(`(?m)^  (/v1/\S*):$`).FindAllSubmatch(spec, -1) {
		routes = append(routes, string(m[1]))
	}
	if len(routes) < 10 {
		t.Fatalf("found %d routes in openapi.yaml", len(routes))
	}
	lit := regexp.MustCompile(`'(/v1/[^'?]*)`)
	used := 0
	for _, name := range []string{"app.js", "views.js"} {
		b, err := fs.ReadFile(static, "static/"+name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range lit.FindAllSubmatch(b, -1) {
			p := string(m[1])
			used++
			if !slices.ContainsFunc(routes, func(r string) bool { return strings.HasPrefix(r, p) }) {
				t.Errorf("%s calls %s, which no route of docs/openapi.yaml starts with", name, p)
			}
		}
	}
	if used < 10 {
		t.Errorf("found %d API paths in the scripts", used)
	}
}
