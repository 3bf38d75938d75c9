package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// A handler given several tokens accepts each of them and nothing else;
// a token removed from the set (the end of a rotation) is refused at
// once, and one added accepted, with no new handler.
func TestTokensAuth(t *testing.T) {
	tokens := NewTokens("old-token", "new-token", "")
	h := newTestHandler(&fakeBackend{}, HandlerOptions{Tokens: tokens})
	status := func(token string) int {
		t.Helper()
		return call(t, h, "POST", "/v1/tasks", `{"handler": "echo"}`, "Authorization", "Bearer "+token).status
	}
	for _, tok := range []string{"old-token", "new-token"} {
		if got := status(tok); got != 201 {
			t.Errorf("submit with %q = %d; want 201", tok, got)
		}
	}
	// The empty token given is dropped, not accepted as "Bearer ".
	for _, tok := range []string{"", "other", "old-token\nnew-token", "old-tokennew-token", "new"} {
		if got := status(tok); got != 401 {
			t.Errorf("submit with %q = %d; want 401", tok, got)
		}
	}
	tokens.Set([]string{"new-token", "newer-token"})
	for tok, want := range map[string]int{"old-token": 401, "new-token": 201, "newer-token": 201} {
		if got := status(tok); got != want {
			t.Errorf("after Set: submit with %q = %d; want %d", tok, got, want)
		}
	}
	if n := tokens.Len(); n != 2 {
		t.Errorf("Len = %d; want 2", n)
	}
}

// The zero Tokens, and one emptied, accept nothing.
func TestTokensEmptyAcceptNothing(t *testing.T) {
	for _, tokens := range []*Tokens{{}, NewTokens(), NewTokens("")} {
		for _, hdr := range []string{"", "Bearer", "Bearer ", "Bearer x"} {
			if tokens.BearerOK(hdr) {
				t.Errorf("%d tokens accept %q", tokens.Len(), hdr)
			}
		}
	}
}

// ParseTokens reads a token file: a bare token is admin and named by its
// fingerprint; name= and scope= name and scope one; a bad line is an
// error naming the line, and never the token.
func TestParseTokens(t *testing.T) {
	list, err := ParseTokens("# tokens\n\n  bare-token-0123456789 \nci-token-0123456789 name=ci scope=submit\r\n" +
		"\tgraf-token-0123456789\tscope=read name=grafana\nw-token-0123456789 name=resizer scope=read,worker\n" +
		"b64+/x==0123456789 name=b64\nnamed-admin-0123456789 name=ops   # a comment\nlast-token-0123456789 #note\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name   string
		scopes Scope
		secret string
	}{
		{Fingerprint("bare-token-0123456789"), ScopeAdmin, "bare-token-0123456789"},
		{"ci", ScopeSubmit, "ci-token-0123456789"},
		{"grafana", ScopeRead, "graf-token-0123456789"},
		{"resizer", ScopeRead | ScopeWorker, "w-token-0123456789"},
		{"b64", ScopeAdmin, "b64+/x==0123456789"},
		{"ops", ScopeAdmin, "named-admin-0123456789"},
		{Fingerprint("last-token-0123456789"), ScopeAdmin, "last-token-0123456789"},
	}
	if len(list) != len(want) {
		t.Fatalf("ParseTokens = %d tokens %v; want %d", len(list), list, len(want))
	}
	set := NewTokenSet(list)
	for i, w := range want {
		if list[i].Name != w.name || list[i].Scopes != w.scopes {
			t.Errorf("token %d = %v; want %q scope %s", i, list[i], w.name, w.scopes)
		}
		if got, ok := set.Match("Bearer " + w.secret); !ok || got.Name != w.name {
			t.Errorf("Match(%q) = %v, %v; want %q", w.secret, got, ok, w.name)
		}
	}
	if fp := Fingerprint("bare-token"); len(fp) != 8 || strings.Trim(fp, "0123456789abcdef") != "" {
		t.Errorf("Fingerprint = %q; want 8 hex digits", fp)
	}
	const a, b = "s3cret-aaaaaaaaaaaa", "s3cret-bbbbbbbbbbbb"
	for _, tt := range []struct{ text, err string }{
		{a + "\n" + b + " scope=write\n", `line 2: unknown scope "write"`},
		{a + " scope=\n", `line 1: unknown scope ""`},
		{a + " scope=read,\n", `line 1: unknown scope ""`},
		{a + " scope=public\n", `line 1: unknown scope "public"`},
		{"# c\n\n" + a + " name=x\n" + b + " name=x\n", `line 4: name "x" is the name of line 3 too`},
		{a + "\n" + a + " scope=read\n", "line 2: the same token as line 1"},
		{a + " name=" + Fingerprint(b) + "\n" + b + "\n", "line 2: name"},
		{a + " with-space\n", "line 1: field 2 is not name=NAME, scope=SCOPES or handlers=PATTERNS"},
		{a + " scope=worker handlers=img.*,\n", `line 1: handlers: "": want a handler name`},
		{a + " scope=worker handlers=a*b\n", `line 1: handlers: "a*b"`},
		// handlers= needs submit or worker, and no admin (a bare token is
		// admin): it limits what a token makes or polls for, never reads.
		{a + " handlers=img.*\n", "line 1: handlers= limits what a submit or worker token may use, and an admin token"},
		{a + " scope=submit,admin handlers=img.*\n", "line 1: handlers= limits what a submit or worker token may use, and an admin token"},
		{a + "\n" + b + " scope=read handlers=img.*\n", "line 2: handlers= limits what a token submits or polls for, and a read-only token does neither"},
		{a + " colour=red\n", "line 1: field 2 is not"},
		{a + " name=x name=y\n", "line 1: name= given twice"},
		{a + " name=-x\n", `line 1: name "-x"`},
		{a + " name=" + strings.Repeat("n", 65) + "\n", "line 1: name"},
		{"# only a comment\n\n", "no token"},
		// A line that lost its token is not a token "name=ops" (F1).
		{a + "\nname=ops\n", "line 2: the line has no token: the token comes first"},
		{"name=grafana scope=read\n", "line 1: the line has no token"},
		{"scope=read name=grafana-dashboard\n", "line 1: the line has no token"},
		// A short token is refused, saying how to make one.
		{a + "\nx\n", "line 2: the token is shorter than 16 bytes: make one with needle keygen --token-file"},
		{"s3cret-12345678 scope=read\n", "line 1: the token is shorter than 16 bytes"},
		{a + " scope=read # trailing\n" + b + " # x scope=admin\n" + "#c\n" + b + "\n", "line 4: the same token as line 2"},
	} {
		_, err := ParseTokens(tt.text)
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("ParseTokens(%q) = %v; want an error holding %q", tt.text, err, tt.err)
			continue
		}
		for _, secret := range []string{"s3cret", "with-space", "grafana", "ops"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("ParseTokens(%q) = %v: the error shows the token", tt.text, err)
			}
		}
	}
	if _, err := ParseTokens("\n"); !errors.Is(err, ErrNoToken) {
		t.Errorf("ParseTokens(empty) = %v; want ErrNoToken", err)
	}
	// The shortest token taken: MinTokenLen bytes.
	if _, err := ParseTokens(strings.Repeat("k", MinTokenLen) + "\n"); err != nil {
		t.Errorf("ParseTokens(a %d-byte token) = %v", MinTokenLen, err)
	}
}

// Neither %v, %+v, %#v nor JSON of a Token shows its secret.
func TestTokenPrintsNoSecret(t *testing.T) {
	list, err := ParseTokens("hunter2-secret-0123 name=ci scope=submit\nother-secret-0123456\n")
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(list)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s", list, list, list, list), string(js)} {
		if strings.Contains(s, "hunter2") || strings.Contains(s, "other-secret") {
			t.Errorf("a token printed shows its secret: %s", s)
		}
	}
}

// Match compares the token given with every token of the set, the first,
// the last or none matching alike, and returns the one that matched.
func TestMatchComparesAll(t *testing.T) {
	list, err := ParseTokens("t-one-0123456789abcdef name=one\nt-two-0123456789abcdef name=two scope=read\nt-three-0123456789abcdef name=three scope=worker\n")
	if err != nil {
		t.Fatal(err)
	}
	set := NewTokenSet(list)
	n := 0
	compare = func(x, y []byte) int { n++; return subtle.ConstantTimeCompare(x, y) }
	defer func() { compare = subtle.ConstantTimeCompare }()
	for hdr, want := range map[string]string{"Bearer t-one-0123456789abcdef": "one", "Bearer t-two-0123456789abcdef": "two", "bearer t-three-0123456789abcdef": "three",
		"Bearer t-four": "", "Bearer t-one-0123456789abcde": "", "Bearer t-one-0123456789abcdef t-two-0123456789abcdef": ""} {
		n = 0
		tok, ok := set.Match(hdr)
		if ok != (want != "") || tok.Name != want {
			t.Errorf("Match(%q) = %v, %v; want %q", hdr, tok, ok, want)
		}
		if n != 3 {
			t.Errorf("Match(%q) compared %d tokens; want all 3", hdr, n)
		}
	}
}

// A scope grants the routes of its own and those it implies: submit
// implies read, admin everything; worker implies nothing.
func TestScopeAllows(t *testing.T) {
	all := []Scope{ScopeRead, ScopeSubmit, ScopeWorker, ScopeAdmin}
	want := map[Scope][]Scope{
		ScopeRead:               {ScopeRead},
		ScopeSubmit:             {ScopeRead, ScopeSubmit},
		ScopeWorker:             {ScopeWorker},
		ScopeRead | ScopeWorker: {ScopeRead, ScopeWorker},
		ScopeAdmin:              all,
	}
	for has, allowed := range want {
		for _, need := range all {
			if got := has.Allows(need); got != slices.Contains(allowed, need) {
				t.Errorf("scope %s allows %s: %v; want %v", has, need, got, !got)
			}
		}
		if !has.Allows(ScopePublic) || has.Allows(0) {
			t.Errorf("scope %s: public allowed %v, none %v; want true, false", has, has.Allows(ScopePublic), has.Allows(0))
		}
	}
}

// allBackend serves every optional route of the API; its optional parts
// are nil (a call of one panics): the route walk below never reaches them.
type allBackend struct {
	*fakeBackend
	ScheduleBackend
	TriggerBackend
	Lister
	Retrier
	LogReader
	Workers
}

// scopedTokens is a token of each scope, and one of two.
const scopedTokens = "t-admin-0123456789abcdef name=admin\nt-read-0123456789abcdef name=dash scope=read\nt-submit-0123456789abcdef name=ci scope=submit\n" +
	"t-worker-0123456789abcdef name=resizer scope=worker\nt-rw-0123456789abcdef name=rw scope=read,worker\n"

// TestRouteScopesWalk walks every route of a handler serving them all:
// each has a scope, and each token is refused it (403 forbidden, before
// anything else) exactly when its scopes do not grant it. A request with
// an unknown parameter shows a token let through (400 naming it) without
// running the route.
func TestRouteScopesWalk(t *testing.T) {
	list, err := ParseTokens(scopedTokens)
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(allBackend{fakeBackend: &fakeBackend{}}, HandlerOptions{Limits: testLimits(), Tokens: NewTokenSet(list),
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) })})
	scopes := h.Scopes()
	if len(h.Patterns()) < 30 {
		t.Fatalf("%d routes: the walk misses some (%v)", len(h.Patterns()), h.Patterns())
	}
	for _, pat := range h.Patterns() {
		need, ok := scopes[pat]
		if !ok || need == 0 {
			t.Errorf("route %q has no scope", pat)
			continue
		}
		method, target := patternRequest(pat)
		for _, tok := range list {
			r := call(t, h, method, target, "", "Authorization", "Bearer t-"+secretOf(tok.Name)+"-0123456789abcdef")
			allowed := tok.Scopes.Allows(need)
			switch {
			case allowed && r.status == 403:
				t.Errorf("%s with %v = 403 %s; want it let through", pat, tok, r.body)
			case !allowed && r.status != 403:
				t.Errorf("%s with %v = %d %s; want 403", pat, tok, r.status, r.body)
			case !allowed:
				e := errorOf(t, r)
				for _, s := range []string{tok.Name, need.String(), method + " ", "/"} {
					if e.Code != CodeForbidden || !strings.Contains(e.Message, s) {
						t.Errorf("%s with %v: %s; want forbidden naming %q", pat, tok, r.body, s)
					}
				}
				if strings.Contains(r.body, "t-"+secretOf(tok.Name)) {
					t.Errorf("%s: the 403 shows the token: %s", pat, r.body)
				}
			}
		}
		if r := call(t, h, method, target, ""); need != ScopePublic && r.status != 401 {
			t.Errorf("%s without a token = %d; want 401", pat, r.status)
		}
	}
}

// secretOf is the secret of a token of scopedTokens, from its name.
func secretOf(name string) string {
	return map[string]string{"admin": "admin", "dash": "read", "ci": "submit", "resizer": "worker", "rw": "rw"}[name]
}

// patternRequest returns a request of a route pattern with an unknown
// parameter: a route let through answers it 400 without running.
func patternRequest(pattern string) (method, target string) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = "GET", pattern
	}
	path = strings.TrimSuffix(path, "{$}")
	path = strings.NewReplacer("{id}", "g1.0", "{lease}", "00112233445566778899aabbccddeeff").Replace(path)
	switch {
	case strings.HasPrefix(path, "/dash/"):
		path += "app.js"
	case strings.HasPrefix(path, "/debug/pprof/"):
		path += "cmdline"
	}
	return method, path + "?zz=1"
}

// Each scope against representative routes, run through: a read token
// reads and is refused a cancel, a submit token submits and cancels (the
// audit trail naming it), a worker token is refused a read, an unnamed
// admin token does all, by its fingerprint.
func TestScopesThroughHandler(t *testing.T) {
	list, err := ParseTokens("t-read-0123456789abcdef name=dash scope=read\nt-submit-0123456789abcdef name=ci scope=submit\nt-worker-0123456789abcdef name=w scope=worker\nt-admin-0123456789abcdef\n")
	if err != nil {
		t.Fatal(err)
	}
	var by string
	f := &fakeBackend{CancelTaskFn: func(_ context.Context, id shard.TaskID, b string) (shard.TaskView, error) {
		by = b
		return shard.TaskView{ID: id, State: shard.Canceled}, nil
	}, TaskFn: func(_ context.Context, id shard.TaskID, _ time.Duration) (shard.TaskView, error) {
		return shard.TaskView{ID: id, State: shard.Ready}, nil
	}, GroupFn: func(_ context.Context, id shard.GroupID, _ time.Duration) (shard.GroupView, error) {
		return shard.GroupView{ID: id}, nil
	}}
	h := newTestHandler(f, HandlerOptions{Tokens: NewTokenSet(list)})
	for _, tt := range []struct {
		token, method, path, body string
		status                    int
		by                        string
	}{
		{"t-read-0123456789abcdef", "GET", "/v1/tasks/g1.0", "", 200, ""},
		{"t-read-0123456789abcdef", "POST", "/v1/tasks", `{"handler":"echo"}`, 403, ""},
		{"t-read-0123456789abcdef", "POST", "/v1/tasks/g1.0/cancel", "", 403, ""},
		{"t-submit-0123456789abcdef", "POST", "/v1/tasks", `{"handler":"echo"}`, 201, ""},
		{"t-submit-0123456789abcdef", "GET", "/v1/groups/g1", "", 200, ""},
		{"t-submit-0123456789abcdef", "POST", "/v1/tasks/g1.0/cancel", "", 200, "token:ci"},
		{"t-worker-0123456789abcdef", "GET", "/v1/tasks/g1.0", "", 403, ""},
		{"t-worker-0123456789abcdef", "POST", "/v1/tasks/g1.0/cancel", "", 403, ""},
		{"t-admin-0123456789abcdef", "POST", "/v1/tasks/g1.0/cancel", "", 200, "token:" + Fingerprint("t-admin-0123456789abcdef")},
		{"t-read-0123456789abcdef", "GET", "/healthz", "", 200, ""},
		{"t-read-0123456789abcdef", "GET", "/v1/nothing", "", 404, ""},
		{"t-worker-0123456789abcdef", "PUT", "/v1/tasks/g1.0", "", 405, ""},
	} {
		by = ""
		r := call(t, h, tt.method, tt.path, tt.body, "Authorization", "Bearer "+tt.token)
		if r.status != tt.status || by != tt.by {
			t.Errorf("%s %s with %s = %d %s (by %q); want %d (by %q)", tt.method, tt.path, tt.token, r.status, r.body, by, tt.status, tt.by)
		}
	}
	r := call(t, h, "POST", "/v1/tasks/g1.0/cancel", "", "Authorization", "Bearer t-read-0123456789abcdef")
	want := `token "dash" (scope read) may not POST /v1/tasks/g1.0/cancel: it needs scope submit`
	if e := errorOf(t, r); e.Code != CodeForbidden || e.Message != want {
		t.Errorf("403 = %s; want forbidden %q", r.body, want)
	}
}

// The token file example of docs/operations.md ("API tokens and
// scopes"), comments and all, is a file a peer takes as it is: an
// operator copies it (audit s75, F2).
func TestParseTokensDocExample(t *testing.T) {
	raw, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	const head = "```\n# /etc/needle/api.tokens"
	i := strings.Index(doc, head)
	if i < 0 {
		t.Fatalf("docs/operations.md has no example starting %q", head)
	}
	example := doc[i+len("```\n"):]
	example = example[:strings.Index(example, "```")]
	list, err := ParseTokens(example)
	if err != nil {
		t.Fatalf("ParseTokens(the example of docs/operations.md) = %v\n%s", err, example)
	}
	got := NewTokenSet(list).Names()
	if len(got) != 6 || got[1] != "ci" || list[0].Scopes != ScopeAdmin || list[3].Scopes != ScopeWorker ||
		list[4].Scopes != ScopeWorker || !list[4].MayPoll("img.resize") || list[4].MayPoll("echo") ||
		list[5].Scopes != ScopeSubmit || !list[5].MayUse("thumb") || list[5].MayUse("echo") {
		t.Errorf("the example of docs/operations.md parses as %v; want 6 tokens, the first admin, the second ci, the next two worker, "+
			"the last two limited to img.* and thumb, the fifth a worker's, the sixth a submitter's", list)
	}
}

// Recheck says what a new request with the same token would get, as the
// set changes: nil, 403 once the token no longer grants the scope, 401
// once it is gone; Watch's context ends at the change that revokes it,
// and not at one that keeps it.
func TestTokensRecheck(t *testing.T) {
	parse := func(text string) []Token {
		list, err := ParseTokens(text)
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	tokens := NewTokenSet(parse("worker-token-012345678 name=wk scope=worker\nother-token-0123456789 name=o"))
	r, _ := http.NewRequest("POST", "/v1/workers/poll", nil)
	r.Header.Set("Authorization", "Bearer worker-token-012345678")
	check := tokens.Recheck(r, ScopeWorker)
	if err := check(); err != nil {
		t.Fatalf("check of a good token = %v", err)
	}
	ctx, stop := tokens.Watch(context.Background(), check)
	defer stop()
	tokens.SetTokens(parse("worker-token-012345678 name=wk scope=read,worker"))
	if err := check(); err != nil {
		t.Fatalf("check after a reload that keeps the scope = %v", err)
	}
	tokens.SetTokens(parse("worker-token-012345678 name=wk scope=read"))
	var e *Error
	if err := check(); !errors.As(err, &e) || e.Status != 403 || e.Code != CodeForbidden ||
		e.Message != `token "wk" (scope read) may not POST /v1/workers/poll: it needs scope worker` {
		t.Fatalf("check after the scope was dropped = %v; want the 403 of a new request", err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Watch's context did not end once the token lost its scope")
	}
	tokens.SetTokens(parse("other-token-0123456789 name=o"))
	if err := check(); !errors.As(err, &e) || e.Status != 401 || e.Code != CodeUnauthenticated {
		t.Fatalf("check after the token was removed = %v; want 401", err)
	}
	var zero Tokens // accepts nothing
	if err := zero.Recheck(r, ScopeWorker)(); !errors.As(err, &e) || e.Status != 401 {
		t.Fatalf("check against the zero Tokens = %v; want 401", err)
	}
}

// A token limited to handlers (handlers=) may use those only: names and
// prefixes match, and a token without handlers= uses any (the polls
// themselves: peer's TestWorkerTokenHandlers; submissions: peer's
// TestSubmitTokenHandlers).
func TestTokenHandlers(t *testing.T) {
	list, err := ParseTokens("t-img-0123456789abcdef name=img scope=worker handlers=img.*,thumb\nt-any-0123456789abcdef name=any scope=worker\n")
	if err != nil {
		t.Fatal(err)
	}
	// Each scope that makes or takes work may be limited, read beside it
	// too (it reads every task anyway, as submit does).
	for _, line := range []string{"scope=submit", "scope=submit,worker", "scope=read,submit", "scope=read,worker", "scope=worker"} {
		l, err := ParseTokens("t-lim-0123456789abcdef " + line + " handlers=img.*,thumb\n")
		if err != nil || !slices.Equal(l[0].Handlers, []string{"img.*", "thumb"}) {
			t.Errorf("ParseTokens(%s handlers=img.*,thumb) = %v, %v; want the token, limited to them", line, l, err)
		}
	}
	for _, c := range []struct {
		tok     int
		handler string
		want    bool
	}{{0, "img.resize", true}, {0, "img.", true}, {0, "thumb", true}, {0, "thumbs", false}, {0, "im", false}, {0, "echo", false}, {1, "echo", true}} {
		if got := list[c.tok].MayPoll(c.handler); got != c.want {
			t.Errorf("%v MayPoll(%q) = %v; want %v", list[c.tok], c.handler, got, c.want)
		}
	}
}
