package allowlist

import (
	"errors"
	"net/url"
	"testing"
)

// TestCheck: prefixes match on a "/" boundary after normalising; the URL
// returned is the one checked (cleaned path, no fragment or userinfo).
func TestCheck(t *testing.T) {
	l, err := Parse([]string{"http://127.0.0.1:9000/hooks/", "https://Example.COM", "http://h:80/a/b"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url, want string // want "" = refused
	}{
		{"http://127.0.0.1:9000/hooks/x", "http://127.0.0.1:9000/hooks/x"},
		{"http://127.0.0.1:9000/hooks/x/", "http://127.0.0.1:9000/hooks/x/"},
		{"http://127.0.0.1:9000/hooks/./x//y?q=1#f", "http://127.0.0.1:9000/hooks/x/y?q=1"},
		{"http://127.0.0.1:9000/hooks/a/../b", "http://127.0.0.1:9000/hooks/b"},
		{"http://127.0.0.1:9000/hooks/../admin", ""},
		{"http://127.0.0.1:9000/hooksX", ""},
		{"http://127.0.0.1:9000@evil/hooks/x", ""},
		{"http://127.0.0.1:09000/hooks/x", "http://127.0.0.1:09000/hooks/x"},
		{"https://example.com:443/anything", "https://example.com:443/anything"},
		{"http://example.com/anything", ""},
		{"http://h/a/b/c", "http://h/a/b/c"},
		{"http://h/a/bc", ""},
		{"http://h/a", ""},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			u, err := url.Parse(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			got, err := l.Check(u)
			gotS := ""
			if err == nil {
				gotS = got.String()
			}
			if gotS != tt.want {
				t.Fatalf("Check(%q) = %q, %v; want %q", tt.url, gotS, err, tt.want)
			}
		})
	}
}

// TestCheckErrors: a URL under no entry wraps ErrNotListed; one that is
// not an absolute http(s) URL says so instead.
func TestCheckErrors(t *testing.T) {
	l, _ := Parse([]string{"https://h/x"})
	for raw, listed := range map[string]bool{
		"https://h/y":     true,
		"ftp://h/x":       false,
		"https://u@h/x":   false,
		"mailto:a@b":      false,
		"https://h:99999": false,
	} {
		u, _ := url.Parse(raw)
		_, err := l.Check(u)
		if err == nil || errors.Is(err, ErrNotListed) != listed {
			t.Errorf("Check(%q) = %v; want ErrNotListed %v", raw, err, listed)
		}
	}
	if _, err := (List{}).Check(&url.URL{Scheme: "https", Host: "h", Path: "/"}); !errors.Is(err, ErrNotListed) {
		t.Errorf("empty list: %v; want ErrNotListed", err)
	}
}

// TestParse refuses entries that are not plain http(s) prefixes, naming
// the entry.
func TestParse(t *testing.T) {
	for _, s := range []string{"ftp://h/", "https://h/?q=1", "https://h/#f", "https://u:p@h/", "/relative", "https://h:x/"} {
		if _, err := Parse([]string{"https://ok/", s}); err == nil {
			t.Errorf("Parse(%q) = nil; want an error", s)
		}
	}
}
