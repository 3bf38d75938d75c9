package peer

import (
	"encoding/json"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/needle-mesh/needle/peer/api"
)

// browserGuard keeps web pages the user visits from using the API through
// the user's browser:
//
//  1. A write (any method but GET, HEAD, OPTIONS) sent cross-site is
//     refused with 403: its Origin names another host than the request's
//     Host ("null" included), or Sec-Fetch-Site says "cross-site" or
//     "same-site". A page may send a form or a no-cors fetch to any address
//     (CSRF); it cannot forge these headers.
//  2. Without an API token, the Host header must name this peer: an IP
//     address, "localhost", or the host of --http. A page on a domain that
//     resolves to 127.0.0.1 (DNS rebinding) is same-origin to the browser,
//     but its requests carry that domain in Host. With a token, a browser
//     cannot authenticate on its own, so the token is the check.
//  3. A write with a body must say Content-Type: application/json (415
//     otherwise): a cross-site form can only send text/plain, form or
//     multipart bodies without a CORS preflight.
func browserGuard(h http.Handler, authed bool, httpAddr string) http.Handler {
	bound, _, _ := net.SplitHostPort(httpAddr)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		write := r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions
		switch {
		case write && crossSite(r):
			refuse(w, http.StatusForbidden, api.CodeForbidden, "cross-site request refused (Origin or Sec-Fetch-Site names another site)")
		case !authed && !hostAllowed(r.Host, bound):
			refuse(w, http.StatusForbidden, api.CodeForbidden, "Host "+r.Host+" is not this peer's address (set NEEDLE_API_TOKEN to serve other names)")
		case write && hasBody(r) && !isJSON(r.Header.Get("Content-Type")):
			refuse(w, http.StatusUnsupportedMediaType, api.CodeUnsupportedType, "a request body must be sent as Content-Type: application/json")
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// crossSite reports whether a request comes from a page of another site.
func crossSite(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s == "cross-site" || s == "same-site" {
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false // not sent by a browser page (curl, the CLI, Go clients)
	}
	u, err := url.Parse(origin)
	return err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host)
}

// hostAllowed reports whether a Host header names this peer (rule 2).
func hostAllowed(hostport, bound string) bool {
	if hostport == "" {
		return true // HTTP/1.0: no browser sends it
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") || (bound != "" && strings.EqualFold(host, bound))
}

// hasBody reports whether a request carries a body.
func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

func refuse(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Status: status, Code: code, Message: msg}})
}
