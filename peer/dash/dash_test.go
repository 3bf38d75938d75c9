package dash

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
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
		for _, want := range []string{`<script src="/dash/app.js"`, `href="/dash/style.css"`, `id="peers"`, `id="groups"`, `id="dag"`, `id="events"`} {
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
// only /dash/ assets; there is no inline script or style (the CSP forbids
// them).
func TestSameOrigin(t *testing.T) {
	entries, err := fs.ReadDir(static, "static")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Errorf("want index.html, app.js and style.css; have %d files", len(entries))
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
		if !strings.HasPrefix(ref, "/dash/") && ref != "data:," {
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
