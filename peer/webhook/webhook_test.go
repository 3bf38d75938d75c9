package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

func newTestSender(t *testing.T, allow ...string) *Sender {
	t.Helper()
	s, err := New(Config{Allow: allow, Secret: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{
		{Allow: []string{"https://h/"}},                           // no secret
		{Allow: []string{"ftp://h/"}, Secret: "x"},                // scheme
		{Allow: []string{"https://h/?q=1"}, Secret: "x"},          // query
		{Allow: []string{"https://u:p@h/"}, Secret: "x"},          // userinfo
		{Allow: []string{"https://h/"}, Secret: "x", Timeout: -1}, // timeout
	} {
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("Validate(%+v) = %v; want ErrConfig", c, err)
		}
	}
	c := Config{}
	if err := c.Validate(); err != nil || c.Timeout != DefaultTimeout {
		t.Errorf("Validate(zero) = %v, timeout %v; want nil, the default", err, c.Timeout)
	}
}

func TestCheck(t *testing.T) {
	nt := newTestSender(t, "https://hooks.example/needle", "http://127.0.0.1:8080/")
	for _, tt := range []struct {
		url string
		ok  bool
	}{
		{"https://hooks.example/needle", true},
		{"https://hooks.example/needle/a?x=1", true},
		{"https://HOOKS.example:443/needle/b", true},
		{"https://hooks.example/needles", false},
		{"https://hooks.example/needle/../admin", false},
		{"http://hooks.example/needle", false},
		{"http://127.0.0.1:8080/anything", true},
		{"http://127.0.0.1:8081/", false},
		{"https://user@hooks.example/needle", false},
		{"mailto:x@y", false},
	} {
		if err := nt.Check(tt.url); (err == nil) != tt.ok {
			t.Errorf("check(%q) = %v; want ok=%v", tt.url, err, tt.ok)
		}
	}
	if err := newTestSender(t).Check("https://hooks.example/needle"); err == nil || !strings.Contains(err.Error(), "allow-list") {
		t.Errorf("no allow-list: %v", err)
	}
}

// A delivery carries its id and attempt, and a signature over the exact
// body; a non-2xx is a failure quoting the status; a URL off this peer's
// list is refused without a call.
func TestSend(t *testing.T) {
	var got *http.Request
	var body []byte
	status := http.StatusNoContent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		w.WriteHeader(status)
		_, _ = w.Write([]byte("nope"))
	}))
	defer srv.Close()
	nt := newTestSender(t, srv.URL+"/hook")
	job := Message{URL: srv.URL + "/hook?token=abc", ID: "g1_5000000000", Attempt: 3, Body: []byte(`{"id":"g1","state":"SUCCEEDED"}`)}
	ctx := context.Background()
	o := nt.Send(ctx, job)
	if o.Err != "" || o.Refused {
		t.Fatalf("Send = %+v", o)
	}
	if got.Header.Get(HeaderID) != "g1_5000000000" || got.Header.Get(HeaderAttempt) != "3" ||
		got.Header.Get("Content-Type") != "application/json" || got.URL.Query().Get("token") != "abc" {
		t.Fatalf("headers %v, url %v", got.Header, got.URL)
	}
	if err := verifyWebhook([]byte("s3cret"), got.Header, body, time.Now()); err != nil {
		t.Fatalf("the delivery does not verify: %v", err)
	}
	if string(body) != string(job.Body) {
		t.Fatalf("body = %s; want %s", body, job.Body)
	}
	status = http.StatusInternalServerError
	if o := nt.Send(ctx, job); o.Refused || !strings.Contains(o.Err, "status 500") || strings.Contains(o.Err, "abc") {
		t.Fatalf("500 = %+v; want a failure quoting the status, not the query", o)
	}
	status = http.StatusGone
	if o := nt.Send(ctx, job); !o.Gone || o.Refused || !strings.Contains(o.Err, "status 410") {
		t.Fatalf("410 = %+v; want a failure that gives up", o)
	}
	other := newTestSender(t, "https://elsewhere.example/")
	got = nil
	if o := other.Send(ctx, job); !o.Refused || !strings.Contains(o.Err, "not under an allowed prefix") || got != nil {
		t.Fatalf("off-list = %+v (called: %v)", o, got != nil)
	}
}

// TestSendsTheCheckedURL: an escaped ".." passes the allow-list
// only as the cleaned path, and the call goes to that path, not to the
// raw URL a server may decode elsewhere (/admin/..%2Fhooks/x).
func TestSendsTheCheckedURL(t *testing.T) {
	paths := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths <- r.URL.EscapedPath()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	nt := newTestSender(t, srv.URL+"/hooks")
	if o := nt.Send(context.Background(), Message{URL: srv.URL + "/admin/..%2Fhooks/x", ID: "g1_0", Attempt: 1, Body: []byte("{}")}); o.Err != "" {
		t.Fatalf("Send = %+v", o)
	}
	if got := <-paths; got != "/hooks/x" {
		t.Fatalf("the webhook went to %q; want the checked path /hooks/x", got)
	}
}

// verifyWebhook checks a delivery the way a Standard Webhooks receiver
// does, written from the scheme and not from the sender's code: the
// signed content is id.timestamp.body, the signature one of the
// space-separated "v1,<base64>" values, and the timestamp within 5 minutes
// of now.
func verifyWebhook(key []byte, h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing headers")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("timestamp %q", ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("timestamp %s off by %v", ts, d)
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%s.%s", id, ts, body)
	want := m.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		v, b64, _ := strings.Cut(s, ",")
		got, err := base64.StdEncoding.DecodeString(b64)
		if v == "v1" && err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no signature matches")
}

// TestStandardWebhooks: a delivery verifies under the Standard Webhooks
// scheme with a plain and with a whsec_ secret; a tampered body, id or
// timestamp, another key, or an authentic delivery replayed 10 minutes
// later do not; a second attempt has a new timestamp and signature.
func TestStandardWebhooks(t *testing.T) {
	calls := make(chan struct {
		h    http.Header
		body []byte
	}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		calls <- struct {
			h    http.Header
			body []byte
		}{r.Header, body}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	raw := []byte("0123456789abcdef0123456789abcdef")
	for _, tt := range []struct {
		name, secret string
		key          []byte
	}{
		{"plain", "s3cret", []byte("s3cret")},
		{"whsec", "whsec_" + base64.StdEncoding.EncodeToString(raw), raw},
	} {
		t.Run(tt.name, func(t *testing.T) {
			nt, err := New(Config{Allow: []string{srv.URL}, Secret: tt.secret})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Unix(1_800_000_000, 0)
			nt.now = func() time.Time { return now }
			job := Message{URL: srv.URL, ID: "g1_7000000008", Attempt: 1, Body: []byte(`{"id":"g1","state":"SUCCEEDED"}`)}
			deliver := func(j Message) (http.Header, []byte) {
				t.Helper()
				if o := nt.Send(t.Context(), j); o.Err != "" {
					t.Fatalf("Send = %+v", o)
				}
				c := <-calls
				return c.h, c.body
			}
			h, body := deliver(job)
			if err := verifyWebhook(tt.key, h, body, now.Add(time.Minute)); err != nil {
				t.Fatalf("verify = %v", err)
			}
			tampered := append([]byte(nil), body...)
			tampered[len(tampered)-2] ^= 1
			other := h.Clone()
			other.Set("webhook-id", "g2_7000000008")
			older := h.Clone()
			older.Set("webhook-timestamp", strconv.FormatInt(now.Unix()-600, 10))
			for _, bad := range []struct {
				name string
				key  []byte
				h    http.Header
				body []byte
				now  time.Time
			}{
				{"tampered body", tt.key, h, tampered, now},
				{"another id", tt.key, other, body, now},
				{"rewritten timestamp", tt.key, older, body, now.Add(-600 * time.Second)},
				{"another key", []byte("other"), h, body, now},
				{"replayed 10 min later", tt.key, h, body, now.Add(10 * time.Minute)},
			} {
				if err := verifyWebhook(bad.key, bad.h, bad.body, bad.now); err == nil {
					t.Errorf("%s: verifies; want refused", bad.name)
				}
			}

			// The next attempt: a new timestamp and signature, the same id.
			now = now.Add(time.Minute)
			job.Attempt = 2
			h2, body2 := deliver(job)
			if h2.Get("webhook-id") != h.Get("webhook-id") || h2.Get("webhook-timestamp") == h.Get("webhook-timestamp") {
				t.Fatalf("attempt 2: id %s ts %s; attempt 1: id %s ts %s; want the same id, a new time",
					h2.Get("webhook-id"), h2.Get("webhook-timestamp"), h.Get("webhook-id"), h.Get("webhook-timestamp"))
			}
			if err := verifyWebhook(tt.key, h2, body2, now); err != nil {
				t.Fatalf("attempt 2: verify = %v", err)
			}
		})
	}
	for _, bad := range []string{"whsec_", "whsec_not*base64"} {
		if _, err := New(Config{Allow: []string{srv.URL}, Secret: bad}); !errors.Is(err, ErrConfig) {
			t.Errorf("New(secret %q) = %v; want ErrConfig", bad, err)
		}
	}
}
