// Package allowlist checks URLs against a list of allowed prefixes: the
// http built-in handler's targets (--http-allow) and the webhooks' notify
// URLs (--notify-allow) both go through it.
//
// An entry is an absolute http or https URL without query or fragment:
// scheme, host[:port] and a path prefix. URLs are compared after parsing
// and normalising (lower-case scheme and host, default port, path.Clean),
// with a "/" boundary: "http://127.0.0.1:9000/hooks/" allows
// "http://127.0.0.1:9000/hooks/x" but neither ".../hooksX" nor
// ".../hooks/../admin". Check returns the URL to send, the one that was
// checked, so that the server never sees a path other than the one
// compared.
package allowlist

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// ErrNotListed is wrapped by Check's error for a well-formed URL that lies
// under no entry; its text reads on from the URL ("http://h/x is not under
// an allowed prefix").
var ErrNotListed = errors.New("not under an allowed prefix")

// Prefix is one parsed, normalised entry.
type Prefix struct {
	scheme string // "http" or "https"
	host   string // lower-case host name, without brackets
	port   string // decimal, default filled in
	path   string // path.Clean-ed, no trailing slash except for "/"
}

// List is a parsed allow-list. The empty list allows nothing.
type List []Prefix

// Parse parses every entry; its error names the first bad one.
func Parse(entries []string) (List, error) {
	l := make(List, 0, len(entries))
	for _, s := range entries {
		p, err := ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		l = append(l, p)
	}
	return l, nil
}

// ParsePrefix parses one entry: an absolute http(s) URL without userinfo,
// query or fragment.
func ParsePrefix(s string) (Prefix, error) {
	u, err := url.Parse(s)
	if err == nil && (u.RawQuery != "" || u.Fragment != "") {
		err = errors.New("query or fragment not allowed")
	}
	var p Prefix
	if err == nil {
		p, err = normalise(u)
	}
	if err != nil {
		return Prefix{}, err
	}
	return p, nil
}

// Check checks u against the list and returns the URL to send: u with its
// path cleaned (so the server sees the path that was checked) and without
// userinfo or fragment. Its error says why u is refused: not an absolute
// http(s) URL without userinfo, or (wrapping ErrNotListed) under no entry.
func (l List) Check(u *url.URL) (*url.URL, error) {
	t, err := normalise(u)
	if err != nil {
		return nil, err
	}
	for _, p := range l {
		if p.under(t) {
			return checked(u, t), nil
		}
	}
	return nil, fmt.Errorf("%s://%s%s is %w", t.scheme, u.Host, t.path, ErrNotListed)
}

// normalise checks that u is an absolute http(s) URL without userinfo and
// returns its comparable form.
func normalise(u *url.URL) (Prefix, error) {
	p := Prefix{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Hostname())}
	switch {
	case p.scheme != "http" && p.scheme != "https":
		return p, errors.New("scheme must be http or https")
	case u.Opaque != "" || p.host == "":
		return p, errors.New("missing host")
	case u.User != nil:
		return p, errors.New("userinfo not allowed")
	case strings.ContainsAny(u.Path, "\\\x00"):
		return p, errors.New("backslash or NUL in path")
	}
	p.port = u.Port()
	if p.port == "" {
		p.port = map[string]string{"http": "80", "https": "443"}[p.scheme]
	}
	n, err := strconv.ParseUint(p.port, 10, 16)
	if err != nil {
		return p, fmt.Errorf("bad port %q", p.port)
	}
	p.port = strconv.FormatUint(n, 10)
	p.path = path.Clean("/" + u.Path)
	return p, nil
}

// under reports whether t lies under prefix p, on a "/" boundary.
func (p Prefix) under(t Prefix) bool {
	if p.scheme != t.scheme || p.host != t.host || p.port != t.port {
		return false
	}
	return p.path == "/" || t.path == p.path || strings.HasPrefix(t.path, p.path+"/")
}

// checked is the URL to send for u, whose normalised form t passed the
// list: t's cleaned path (so the server sees exactly the path that was
// checked, never an escaped "..%2F" it may decode itself), u's host and
// query, no userinfo or fragment.
func checked(u *url.URL, t Prefix) *url.URL {
	out := &url.URL{Scheme: t.scheme, Host: u.Host, Path: t.path, RawQuery: u.RawQuery}
	if strings.HasSuffix(u.Path, "/") && t.path != "/" {
		out.Path += "/"
	}
	return out
}
