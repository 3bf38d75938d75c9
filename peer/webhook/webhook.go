// Package webhook delivers signed webhooks: one POST per attempt, signed
// the Standard Webhooks way (webhook-id, webhook-timestamp,
// webhook-signature: v1,<base64 HMAC-SHA256 of id.timestamp.body>), to a
// URL that must lie under the configured allow-list (package allowlist).
//
// It knows nothing of groups or retries: the Node decides which
// deliveries to make and when to try again (node/notify.go), the runtime
// (package peer) builds each Message (the group's JSON and its id) and
// hands the Result back to the Node. needled builds the Sender from its
// --notify-* flags (New).
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/needle-mesh/needle/peer/allowlist"
)

// Config configures webhook deliveries: the "notify" URL of a task or
// group, called once it reaches a terminal state.
type Config struct {
	// Allow lists the URL prefixes ("https://hooks.example.com/needle") a
	// notify URL must lie under: checked by the peer that accepts the
	// submission (else 400) and again by the owner that delivers (else the
	// delivery gives up, saying so). Empty: notify is refused.
	Allow []string
	// Secret keys the signature of every delivery, the Standard Webhooks
	// scheme (webhook-signature: v1,<base64 HMAC-SHA256>): written
	// whsec_<base64> its key is the decoded bytes, as the Standard
	// Webhooks libraries read it; any other string is the key as is.
	// Required when Allow is set.
	Secret string
	// Timeout bounds one delivery, from connect to the response. Default
	// 10 s.
	Timeout time.Duration
	// Concurrency bounds this peer's deliveries in flight: the runtime
	// hands it to the Node, which holds back the rest. 0 = the Node's
	// default.
	Concurrency int
	// Client makes the calls; nil = a client that follows no redirects (a
	// 3xx is a failed attempt).
	Client *http.Client
}

// Delivery headers: the three of Standard Webhooks, and the attempt.
const (
	// HeaderID is the delivery's id, the same in every attempt of one
	// delivery (and from every owner that makes one): receivers dedupe on
	// it.
	HeaderID = "webhook-id"
	// HeaderTimestamp is the attempt's time in Unix seconds, signed:
	// receivers refuse one too far from their clock (a replay).
	HeaderTimestamp = "webhook-timestamp"
	// HeaderSignature is "v1," + base64 HMAC-SHA256 of id.timestamp.body
	// under the secret's key (Signature).
	HeaderSignature = "webhook-signature"
	// HeaderAttempt is the 1-based attempt number.
	HeaderAttempt = "X-Needle-Attempt"
)

// ErrConfig is wrapped by the errors of a Config that Validate refuses.
var ErrConfig = errors.New("webhook: config")

// secretPrefix marks a secret given as base64 key bytes.
const secretPrefix = "whsec_"

// excerpt bounds the response body quoted in a failed attempt.
const excerpt = 200

// DefaultTimeout is Config.Timeout when it is zero.
const DefaultTimeout = 10 * time.Second

// Validate fills the defaults and reports the first invalid field, named
// by its needled flag.
func (c *Config) Validate() error {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	switch {
	case c.Timeout < 0:
		return fmt.Errorf("%w: --notify-timeout must be > 0", ErrConfig)
	case c.Concurrency < 0:
		return fmt.Errorf("%w: --notify-concurrency must be > 0", ErrConfig)
	case len(c.Allow) > 0 && c.Secret == "":
		return fmt.Errorf("%w: --notify-allow needs --notify-secret: every delivery is signed", ErrConfig)
	}
	if _, err := Key(c.Secret); err != nil {
		return fmt.Errorf("%w: --notify-secret: %w", ErrConfig, err)
	}
	if _, err := allowlist.Parse(c.Allow); err != nil {
		return fmt.Errorf("%w: --notify-allow %w", ErrConfig, err)
	}
	return nil
}

// Sender makes webhook calls. It is safe for concurrent use: the runtime
// calls Send from one goroutine per delivery.
type Sender struct {
	allow  allowlist.List
	key    []byte // HMAC key, from Config.Secret (Key)
	client *http.Client
	now    func() time.Time // the attempts' webhook-timestamp; time.Now
}

// New validates cfg (filling its defaults) and returns its Sender.
func New(cfg Config) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Sender{client: cfg.Client, now: time.Now}
	s.key, _ = Key(cfg.Secret)              // checked by Validate
	s.allow, _ = allowlist.Parse(cfg.Allow) // checked by Validate
	if s.client == nil {
		s.client = &http.Client{
			Timeout:       cfg.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return s, nil
}

// Message is one attempt of one delivery.
type Message struct {
	URL     string // the notify URL, checked against the allow-list again
	ID      string // webhook-id: the same in every attempt of a delivery
	Attempt int    // 1-based
	Body    []byte // JSON, signed and sent as is
}

// Result is how one attempt ended.
type Result struct {
	Err     string        // "" = delivered (a 2xx answer)
	Refused bool          // not attempted: the URL is off the allow-list, or the request cannot be built
	Gone    bool          // the receiver answered 410 Gone: give up, do not retry
	Took    time.Duration // the call, to the response or the error; 0 when refused
}

// Check reports why raw may not be a notify URL on this peer, or nil.
func (s *Sender) Check(raw string) error {
	_, err := s.target(raw)
	return err
}

// target checks raw against the allow-list and returns the URL to call:
// the one that was checked (allowlist.List.Check), not raw.
func (s *Sender) target(raw string) (*url.URL, error) {
	if len(s.allow) == 0 {
		return nil, errors.New("webhooks are off on this peer: it has no notify allow-list (needled --notify-allow)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %v", err)
	}
	t, err := s.allow.Check(u)
	switch {
	case errors.Is(err, allowlist.ErrNotListed):
		return nil, fmt.Errorf("%w (needled --notify-allow)", err)
	case err != nil:
		return nil, fmt.Errorf("%q: %w", raw, err)
	}
	return t, nil
}

// Send makes one attempt: it POSTs m.Body, signed, to m.URL and says how
// it went. It returns when the call ends, bounded by the client's timeout
// or ctx.
func (s *Sender) Send(ctx context.Context, m Message) Result {
	var r Result
	u, err := s.target(m.URL)
	if err != nil {
		r.Err, r.Refused = "not delivered by this peer: "+err.Error(), true
		return r
	}
	where := u.Scheme + "://" + u.Host + u.Path // no query: it may hold secrets
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(m.Body))
	if err != nil {
		r.Err, r.Refused = "POST "+where+": "+err.Error(), true
		return r
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "needle-webhook/1")
	ts := s.now().Unix()
	req.Header[HeaderID] = []string{m.ID} // lower-case as the scheme writes them
	req.Header[HeaderTimestamp] = []string{strconv.FormatInt(ts, 10)}
	req.Header[HeaderSignature] = []string{Signature(s.key, m.ID, ts, m.Body)}
	req.Header.Set(HeaderAttempt, strconv.Itoa(m.Attempt))
	start := time.Now()
	resp, err := s.client.Do(req)
	r.Took = time.Since(start)
	if err != nil {
		r.Err = fmt.Sprintf("POST %s: %v", where, unwrapURLError(err))
		return r
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		quoted, _ := io.ReadAll(io.LimitReader(resp.Body, excerpt))
		r.Err = fmt.Sprintf("POST %s: status %d: %q", where, resp.StatusCode, strings.ToValidUTF8(string(quoted), "\uFFFD"))
		r.Gone = resp.StatusCode == http.StatusGone // the receiver wants no more calls
		return r
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	return r
}

// unwrapURLError drops the *url.Error wrapper, whose text repeats the URL
// with its query.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Key returns the HMAC key of a secret: the decoded bytes of
// "whsec_<base64>", else the secret's own bytes.
func Key(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok {
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) == 0 {
		return nil, errors.New("a whsec_ secret is followed by the key in standard base64")
	}
	return key, nil
}

// Signature returns the webhook-signature value of a delivery:
// "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)).
func Signature(key []byte, id string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}
