package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
)

// Scope is what a token may do, and what a route needs. A token holds a
// set of scopes (read, submit, worker, admin); a route needs exactly one
// of them, or none (ScopePublic). The scopes are coarse and fixed
// (docs/decisions.md, "API tokens have fixed scopes").
type Scope uint8

const (
	// ScopeRead: every read of the API (GET), the dashboard's included.
	ScopeRead Scope = 1 << iota
	// ScopeSubmit: read, plus creating, canceling and retrying tasks and
	// groups, and creating, pausing, resuming, triggering and deleting
	// schedules.
	ScopeSubmit
	// ScopeWorker: the external workers' routes (poll, and a lease's
	// outcome, heartbeat, logs and release). No read: a worker client
	// makes none (add read for one that does).
	ScopeWorker
	// ScopeAdmin: everything, the peer's operations (drain, forget,
	// pprof) included. A bare token (no scope=) is admin.
	ScopeAdmin
	// ScopePublic is a route's, never a token's: the route needs no token
	// (/healthz, the dashboard's static files).
	ScopePublic
)

// scopeNames are the scopes a token file may name, in order.
var scopeNames = []struct {
	s    Scope
	name string
}{{ScopeRead, "read"}, {ScopeSubmit, "submit"}, {ScopeWorker, "worker"}, {ScopeAdmin, "admin"}, {ScopePublic, "public"}}

// String names the scopes of s, comma-separated ("read,worker").
func (s Scope) String() string {
	var names []string
	for _, n := range scopeNames {
		if s&n.s != 0 {
			names = append(names, n.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// grants returns the route scopes a token's scopes allow: submit implies
// read, admin implies everything.
func (s Scope) grants() Scope {
	g := s
	if s&ScopeSubmit != 0 {
		g |= ScopeRead
	}
	if s&ScopeAdmin != 0 {
		g |= ScopeRead | ScopeSubmit | ScopeWorker
	}
	return g | ScopePublic
}

// Allows reports whether a token of scopes s may use a route that needs
// need (any one of need's scopes, when it holds several).
func (s Scope) Allows(need Scope) bool { return need != 0 && s.grants()&need != 0 }

// Token is one token of a Tokens set: its name and scopes. The secret
// itself is kept unexported, and no method prints it.
type Token struct {
	// Name names the token in the audit trail (by "token:NAME") and in
	// errors: the name= of its line, else its Fingerprint.
	Name string
	// Scopes are the scopes granted.
	Scopes Scope
	// Handlers, when set (handlers= of a submit or worker token), are the
	// only handlers the token may use: poll for (worker), and create,
	// retry and cancel tasks of, or schedule (submit). Names, or prefixes
	// ending in '*' ("img.*"). Nil: any. Reads are not limited by them.
	Handlers []string

	sum [sha256.Size]byte // of the secret, which is not kept
}

// newToken returns the token of secret; an empty name is the fingerprint.
func newToken(secret, name string, scopes Scope) Token {
	if name == "" {
		name = Fingerprint(secret)
	}
	return Token{Name: name, Scopes: scopes, sum: sha256.Sum256([]byte(secret))}
}

// Fingerprint is the name of a token without one: the first 8 hex digits
// of the SHA-256 of the secret. It is the same on every peer and across
// reloads, and tells nothing of the secret.
func Fingerprint(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:4])
}

// By is how the audit trail names the token: "token:NAME".
func (t Token) By() string { return "token:" + t.Name }

// String names the token and its scopes, never the secret.
func (t Token) String() string { return fmt.Sprintf("token %q (scope %s)", t.Name, t.Scopes) }

// GoString is String: %#v prints no secret either.
func (t Token) GoString() string { return t.String() }

// ErrNoToken is ParseTokens' error for a text that holds no token line.
var ErrNoToken = errors.New("api: no token")

// tokenName is what a name= may be.
var tokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// MinTokenLen is the shortest token a token file may hold, in bytes.
// needle keygen --token-file writes 64 hex digits (32 random bytes).
const MinTokenLen = 16

// ParseTokens parses a token file (--api-token-file): one token a line,
// blank lines and lines starting with "#" skipped. A line is the token,
// then optionally "name=NAME", "scope=S[,S...]" and "handlers=H[,H...]"
// separated by white space; a field starting with "#" starts a comment,
// to the end of the line:
//
//	k3J9...Qa                          # a bare token: admin, named by its fingerprint
//	Zt8x...w1 name=ci scope=submit
//	Pq2m...e7 name=grafana scope=read
//	Wd0c...9f name=resizer scope=read,worker
//	Lm4n...b2 name=img-ci scope=submit,worker handlers=img.*,thumb
//
// handlers= (Token.Handlers) needs a submit or worker scope, and no
// admin: a read-only token would be limited in nothing, an admin one
// may do everything.
//
// A token comes first, holds no white space, does not start with "#",
// and is at least MinTokenLen bytes long; it may hold "=" (base64). A
// line that starts with name= or scope= has lost its token, and is an
// error. Errors name the line ("line 3: ..."), never the token. A name
// (or fingerprint) used twice, or a token given twice, is an error; so is
// a file with no token.
func ParseTokens(text string) ([]Token, error) {
	var list []Token
	lineOf := map[string]int{} // name -> line
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		t, err := parseTokenLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		for _, o := range list {
			if o.sum == t.sum {
				return nil, fmt.Errorf("line %d: the same token as line %d", n, lineOf[o.Name])
			}
		}
		if prev, ok := lineOf[t.Name]; ok {
			return nil, fmt.Errorf("line %d: name %q is the name of line %d too", n, t.Name, prev)
		}
		lineOf[t.Name] = n
		list = append(list, t)
	}
	if len(list) == 0 {
		return nil, ErrNoToken
	}
	return list, nil
}

// parseTokenLine parses one line of a token file (not blank, no comment).
func parseTokenLine(line string) (Token, error) {
	fields := strings.Fields(line)
	for i, f := range fields {
		if strings.HasPrefix(f, "#") {
			fields = fields[:i] // a comment, to the end of the line
			break
		}
	}
	if len(fields) == 0 {
		return Token{}, errors.New("the line has no token")
	}
	secret, name, scopes := fields[0], "", Scope(0)
	var handlers []string
	if strings.HasPrefix(secret, "name=") || strings.HasPrefix(secret, "scope=") {
		return Token{}, errors.New("the line has no token: the token comes first (TOKEN name=NAME scope=SCOPES)")
	}
	if len(secret) < MinTokenLen {
		return Token{}, fmt.Errorf("the token is shorter than %d bytes: make one with needle keygen --token-file FILE, or openssl rand -hex 32", MinTokenLen)
	}
	seen := map[string]bool{}
	for i, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || (k != "name" && k != "scope" && k != "handlers") {
			// Not echoed: a token holding a space would show here.
			return Token{}, fmt.Errorf("field %d is not name=NAME, scope=SCOPES or handlers=PATTERNS (a token holds no white space)", i+2)
		}
		if seen[k] {
			return Token{}, fmt.Errorf("%s= given twice", k)
		}
		seen[k] = true
		switch k {
		case "name":
			if !tokenName.MatchString(v) {
				return Token{}, fmt.Errorf("name %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", v)
			}
			name = v
		case "scope":
			for _, s := range strings.Split(v, ",") {
				sc, err := ParseScope(s)
				if err != nil {
					return Token{}, err
				}
				scopes |= sc
			}
		case "handlers":
			for _, h := range strings.Split(v, ",") {
				if !handlerPattern.MatchString(h) {
					return Token{}, fmt.Errorf("handlers: %q: want a handler name, or a prefix ending in '*' (img.*), comma-separated", h)
				}
				handlers = append(handlers, h)
			}
		}
	}
	if scopes == 0 {
		scopes = ScopeAdmin
	}
	if handlers != nil && scopes&ScopeAdmin != 0 {
		return Token{}, errors.New("handlers= limits what a submit or worker token may use, and an admin token (a line without scope= is admin) may do everything: give the token scope=submit and/or worker")
	}
	if handlers != nil && scopes&(ScopeSubmit|ScopeWorker) == 0 {
		return Token{}, errors.New("handlers= limits what a token submits or polls for, and a read-only token does neither: give it scope=submit and/or worker, or drop handlers=")
	}
	t := newToken(secret, name, scopes)
	t.Handlers = handlers
	return t, nil
}

// handlerPattern is what an entry of handlers= may be: a handler name,
// or a prefix of one ending in '*'.
var handlerPattern = regexp.MustCompile(`^[^\s,*]+\*?$|^\*$`)

// mayPoll is nil when tok may poll for every one of handlers, else the
// 403 that names the first it may not.
func mayPoll(tok Token, handlers []string) error {
	for i, h := range handlers {
		if !tok.MayUse(h) {
			return handlerForbidden(tok, fmt.Sprintf("handlers[%d]", i), "poll only for", h)
		}
	}
	return nil
}

// handlerForbidden is the 403 of token tok, limited to its Handlers,
// naming field, the path of handler in the request (or in the resource
// acted on); doing says what the token may do ("poll only for").
func handlerForbidden(tok Token, field, doing, handler string) *Error {
	return &Error{Status: http.StatusForbidden, Code: CodeForbidden, Field: field,
		Message: fmt.Sprintf("token %q may %s handlers %s, not %q", tok.Name, doing, strings.Join(tok.Handlers, ","), handler)}
}

// MayPoll reports whether the token may poll for tasks of handler
// (MayUse).
func (t Token) MayPoll(handler string) bool { return t.MayUse(handler) }

// MayUse reports whether the token may use handler: poll for its tasks,
// create, retry and cancel them, schedule them. Any handler when it names
// none (Handlers), else one it names or whose prefix it names.
func (t Token) MayUse(handler string) bool {
	if t.Handlers == nil {
		return true
	}
	for _, p := range t.Handlers {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(handler, prefix) || p == handler {
			return true
		}
	}
	return false
}

// ParseScope parses one scope a token may hold: read, submit, worker or
// admin.
func ParseScope(s string) (Scope, error) {
	for _, n := range scopeNames {
		if n.name == s && n.s != ScopePublic {
			return n.s, nil
		}
	}
	return 0, fmt.Errorf("unknown scope %q: want read, submit, worker or admin", s)
}

// Tokens is the set of bearer tokens an API accepts, each with a name and
// scopes: any one of them authenticates a request, and its scopes say
// which routes it may use. It is a set, not one token, so that a token
// can be rotated without an outage: add the new one, move the clients to
// it, then remove the old one. Set and SetTokens replace the set while
// requests are served (needled does on SIGHUP); a request already
// served keeps the token it was authorized with, but a long poll (a
// worker's poll, a read's ?wait=, a log's follow) re-checks it (Recheck,
// Watch). The zero value accepts nothing.
type Tokens struct {
	mu  sync.Mutex // serialises replacements of set
	set atomic.Pointer[tokenSet]
}

// tokenSet is one version of a Tokens' set.
type tokenSet struct {
	list    []Token
	changed chan struct{} // closed once the set is replaced
}

// NewTokens returns the set of tokens, each admin and named by its
// fingerprint; empty ones are dropped.
func NewTokens(tokens ...string) *Tokens {
	t := &Tokens{}
	t.Set(tokens)
	return t
}

// NewTokenSet returns the set of list (as ParseTokens returns it).
func NewTokenSet(list []Token) *Tokens {
	t := &Tokens{}
	t.SetTokens(list)
	return t
}

// Set replaces the tokens accepted with admin tokens; empty ones are
// dropped (an empty token would let "Bearer " through).
func (t *Tokens) Set(tokens []string) {
	kept := make([]Token, 0, len(tokens))
	for _, tok := range tokens {
		if tok != "" {
			kept = append(kept, newToken(tok, "", ScopeAdmin))
		}
	}
	t.store(kept)
}

// SetTokens replaces the tokens accepted with list (as ParseTokens
// returns it); a zero Token is dropped.
func (t *Tokens) SetTokens(list []Token) {
	kept := make([]Token, 0, len(list))
	for _, tok := range list {
		if tok.sum != ([sha256.Size]byte{}) {
			kept = append(kept, tok)
		}
	}
	t.store(kept)
}

// store makes list the set, and tells the watchers of the one it
// replaces (Watch).
func (t *Tokens) store(list []Token) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.set.Load()
	t.set.Store(&tokenSet{list: list, changed: make(chan struct{})})
	if old != nil {
		close(old.changed)
	}
}

// current returns the set now (an empty one for the zero Tokens).
func (t *Tokens) current() *tokenSet {
	if s := t.set.Load(); s != nil {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.set.Load(); s != nil {
		return s
	}
	s := &tokenSet{changed: make(chan struct{})}
	t.set.Store(s)
	return s
}

// Len returns the number of tokens accepted.
func (t *Tokens) Len() int {
	if s := t.set.Load(); s != nil {
		return len(s.list)
	}
	return 0
}

// Names returns the names of the tokens accepted, in order.
func (t *Tokens) Names() []string {
	var names []string
	if s := t.set.Load(); s != nil {
		for _, tok := range s.list {
			names = append(names, tok.Name)
		}
	}
	return names
}

// compare compares two token digests in constant time (a variable, so
// that a test can count the comparisons).
var compare = subtle.ConstantTimeCompare

// Match returns the token an Authorization header carries as "Bearer
// <token>" (the scheme in any case). The SHA-256 of the token given is
// compared with that of every token of the set, each in constant time,
// whether or not an earlier one matched, and the match is picked without
// a branch: the time taken tells nothing of which token matched, nor of
// a token's length.
func (t *Tokens) Match(header string) (Token, bool) {
	return t.set.Load().match(header)
}

// match is Match in the set s (nil: no token).
func (s *tokenSet) match(header string) (Token, bool) {
	got, ok := bearer(header)
	if !ok || s == nil || len(s.list) == 0 {
		return Token{}, false
	}
	sum := sha256.Sum256([]byte(got))
	found, match := 0, 0
	for i := range s.list {
		eq := compare(sum[:], s.list[i].sum[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
		match |= eq
	}
	if match != 1 {
		return Token{}, false
	}
	return s.list[found], true
}

// Recheck returns a check of request r against the set as it is when the
// check is called: nil while the token r carries is still in the set and
// still grants need (and may poll for handlers: Token.Handlers), else the
// *Error a new request with that token would get (401 unauthenticated once
// it is removed, 403 forbidden once it no longer grants need, or no longer
// names one of handlers). A check costs one atomic load while the set is
// unchanged; it is safe for concurrent use. A worker's waiting poll is
// checked so before each task handed to it: a token revoked while the
// poll waits is handed no task.
func (t *Tokens) Recheck(r *http.Request, need Scope, handlers ...string) func() error {
	header, method, path := r.Header.Get("Authorization"), r.Method, r.URL.Path
	type verdict struct {
		set *tokenSet
		err error
	}
	var last atomic.Pointer[verdict] // no lock: the hub calls it under its own
	return func() error {
		s := t.current()
		if v := last.Load(); v != nil && v.set == s {
			return v.err
		}
		v := &verdict{set: s}
		tok, ok := s.match(header)
		switch {
		case !ok:
			v.err = errUnauthenticated(header)
		case !tok.Scopes.Allows(need):
			v.err = forbidden(tok.Name, tok.Scopes, method, path, need)
		default:
			v.err = mayPoll(tok, handlers)
		}
		last.Store(v)
		return v.err
	}
}

// Watch returns a context of ctx that ends once check (a Recheck)
// fails after a change of the set, and the function that stops watching
// (call it when done with the context): a waiting poll ends at once when
// its token is revoked, not at its next task or its wait's end.
func (t *Tokens) Watch(ctx context.Context, check func() error) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	s := t.current()
	if check() != nil {
		cancel()
		return ctx, cancel
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.changed:
				s = t.current()
				if check() != nil {
					cancel()
					return
				}
			}
		}
	}()
	return ctx, cancel
}

// BearerOK reports whether an Authorization header carries one of the
// tokens as "Bearer <token>" (Match).
func (t *Tokens) BearerOK(header string) bool {
	_, ok := t.Match(header)
	return ok
}

// bearer returns the token of an Authorization header "Bearer <token>".
func bearer(header string) (string, bool) {
	scheme, got, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(got, " "), true
}

type tokenKey struct{}

// withToken returns r with tok as the token that authenticated it.
func withToken(r *http.Request, tok Token) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), tokenKey{}, tok))
}

// TokenOf returns the token that authenticated r, when one did.
func TokenOf(r *http.Request) (Token, bool) {
	tok, ok := r.Context().Value(tokenKey{}).(Token)
	return tok, ok
}

// By names the caller of r for the audit trail and the logs:
// "token:NAME" for a request a token authenticated, else the client's
// address (an API without tokens).
func By(r *http.Request) string {
	if tok, ok := TokenOf(r); ok {
		return tok.By()
	}
	return r.RemoteAddr
}

// errUnauthenticated is the error of a missing or wrong token in the
// Authorization header: which of the two, and what to send. It said
// "missing or wrong bearer token" for both, and a team that forgot to set
// its token could not tell it from a token of another mesh.
func errUnauthenticated(header string) *Error {
	msg := "wrong bearer token: not one of this peer's (needled --api-token-file; a token removed from it is revoked at its reload)"
	tok, ok := bearer(header)
	if h := strings.TrimSpace(header); h == "" || strings.EqualFold(h, "Bearer") || ok && strings.TrimSpace(tok) == "" {
		msg = `missing: send "Authorization: Bearer <token>" (the CLI and the clients read NEEDLE_API_TOKEN, or the file NEEDLE_API_TOKEN_FILE names)`
	} else if !ok {
		msg = `not a bearer token: send "Authorization: Bearer <token>"`
	}
	return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: "Authorization: " + msg, Field: "Authorization"}
}

// refuseUnauthenticated writes the 401 of a missing or wrong token in r.
func refuseUnauthenticated(w http.ResponseWriter, r *http.Request) {
	writeAuthErr(w, errUnauthenticated(r.Header.Get("Authorization")))
}

// writeAuthErr writes e, with WWW-Authenticate when it is a 401.
func writeAuthErr(w http.ResponseWriter, e *Error) {
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="needle"`)
	}
	writeErr(w, e)
}

// forbidden is the 403 of a token (name, its scopes) that does not grant
// need for method and path.
func forbidden(name string, scopes Scope, method, path string, need Scope) *Error {
	return &Error{Status: http.StatusForbidden, Code: CodeForbidden,
		Message: fmt.Sprintf("token %q (scope %s) may not %s %s: it needs scope %s", name, scopes, method, path, need)}
}

// authorize answers 403 forbidden, and reports false, when the token
// that authenticated r does not grant need (none did: forbidden too).
func authorize(w http.ResponseWriter, r *http.Request, need Scope) bool {
	if need == ScopePublic {
		return true
	}
	tok, ok := TokenOf(r)
	if ok && tok.Scopes.Allows(need) {
		return true
	}
	name := "(none)"
	if ok {
		name = tok.Name
	}
	writeErr(w, forbidden(name, tok.Scopes, r.Method, r.URL.Path, need))
	return false
}

// Guard returns h behind tokens for a route that needs scope: 401
// unauthenticated without one of the tokens, 403 forbidden with a token
// that does not grant scope; the token that matched is the request's
// (TokenOf, By). A nil tokens (an API without tokens) guards nothing.
// It is for routes served beside the Handler (the peer's own).
func Guard(tokens *Tokens, scope Scope, h http.Handler) http.Handler {
	if scope == 0 {
		panic("api: Guard of a route with no scope")
	}
	if tokens == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if scope == ScopePublic {
			h.ServeHTTP(w, r)
			return
		}
		tok, ok := tokens.Match(r.Header.Get("Authorization"))
		if !ok {
			refuseUnauthenticated(w, r)
			return
		}
		r = withToken(r, tok)
		if authorize(w, r, scope) {
			h.ServeHTTP(w, r)
		}
	})
}
