package peer

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestWrongMethod asks every path the peer serves (its own routes and the
// API handler's) with each method it does not serve: each answer is 405
// method_not_allowed with an Allow header naming the path's methods, never
// 404 no route (api.md: a known route with another method is a 405).
func TestWrongMethod(t *testing.T) {
	p, c, _ := startPeer(t, t.TempDir(), 2)
	allow := map[string][]string{} // concrete path -> methods
	for _, pat := range p.routes().patterns {
		method, path, ok := strings.Cut(pat, " ")
		if !ok {
			continue // any method (/debug/pprof/)
		}
		path = strings.TrimSuffix(path, "{$}")
		if strings.HasSuffix(path, "/") && path != "/" {
			path += "x" // a subtree: one path in it
		}
		segs := strings.Split(path, "/")
		for i, s := range segs {
			if strings.HasPrefix(s, "{") {
				segs[i] = "x1.0"
			}
		}
		path = strings.Join(segs, "/")
		allow[path] = append(allow[path], method)
	}
	if len(allow) < 30 {
		t.Fatalf("only %d paths served: %v", len(allow), allow)
	}
	for path, methods := range allow {
		slices.Sort(methods)
		want := strings.Join(methods, ", ")
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			if slices.Contains(methods, m) {
				continue
			}
			req, err := http.NewRequestWithContext(t.Context(), m, c.BaseURL+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != want {
				t.Errorf("%s %s = %d, Allow %q; want 405, Allow %q", m, path, resp.StatusCode, resp.Header.Get("Allow"), want)
			}
		}
	}
}
