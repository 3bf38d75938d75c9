package peer

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/allowlist"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// NotifyConfig configures webhook deliveries: the "notify" URL of a task
// or group, called once it reaches a terminal state (notify.go).
type NotifyConfig struct {
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
	// Concurrency bounds this peer's deliveries in flight. Default 16.
	Concurrency int
	// Client makes the calls; nil = a client that follows no redirects (a
	// 3xx is a failed attempt).
	Client *http.Client
}

// Delivery headers: the three of Standard Webhooks, and the attempt.
const (
	// HeaderWebhookID is the delivery's id, the same in every attempt of
	// one delivery (and from every owner that makes one): receivers dedupe
	// on it. WebhookID makes it.
	HeaderWebhookID = "webhook-id"
	// HeaderWebhookTimestamp is the attempt's time in Unix seconds,
	// signed: receivers refuse one too far from their clock (a replay).
	HeaderWebhookTimestamp = "webhook-timestamp"
	// HeaderWebhookSignature is "v1," + base64 HMAC-SHA256 of
	// id.timestamp.body under the secret's key (WebhookSignature).
	HeaderWebhookSignature = "webhook-signature"
	// HeaderAttempt is the 1-based attempt number.
	HeaderAttempt = "X-Needle-Attempt"
)

// webhookSecretPrefix marks a secret given as base64 key bytes.
const webhookSecretPrefix = "whsec_"

// notifyExcerpt bounds the response body quoted in a failed attempt.
const notifyExcerpt = 200

func (c *NotifyConfig) validate() (allowlist.List, error) {
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Concurrency == 0 {
		c.Concurrency = node.DefaultNotifyInflight
	}
	switch {
	case c.Timeout < 0:
		return nil, errors.New("peer: --notify-timeout must be > 0")
	case c.Concurrency < 0:
		return nil, errors.New("peer: --notify-concurrency must be > 0")
	case len(c.Allow) > 0 && c.Secret == "":
		return nil, errors.New("peer: --notify-allow needs --notify-secret: every delivery is signed")
	}
	if _, err := WebhookKey(c.Secret); err != nil {
		return nil, fmt.Errorf("peer: --notify-secret: %w", err)
	}
	allow, err := allowlist.Parse(c.Allow)
	if err != nil {
		return nil, fmt.Errorf("peer: --notify-allow %w", err)
	}
	return allow, nil
}

// notifier makes the webhook calls the Node hands out (Ready.Notify), one
// goroutine each (the Node bounds how many are out), and hands each result
// back to the loop.
type notifier struct {
	allow  allowlist.List
	key    []byte // HMAC key, from NotifyConfig.Secret (WebhookKey)
	client *http.Client
	now    func() time.Time // the attempts' webhook-timestamp; time.Now
	out    chan notifyOut   // results, into the loop

	deliveries *prometheus.CounterVec
	latency    prometheus.Histogram
}

// notifyOut is how one delivery ended.
type notifyOut struct {
	job     shard.NotifyJob
	err     string // "" = delivered
	refused bool   // not attempted: the URL is not on this peer's allow-list
	gone    bool   // the receiver answered 410 Gone: give up, do not retry
	took    time.Duration
}

func newNotifier(cfg NotifyConfig, allow allowlist.List, reg *prometheus.Registry) *notifier {
	key, _ := WebhookKey(cfg.Secret) // checked by validate
	nt := &notifier{allow: allow, key: key, client: cfg.Client, now: time.Now,
		out: make(chan notifyOut, cfg.Concurrency+16)}
	if nt.client == nil {
		nt.client = &http.Client{
			Timeout:       cfg.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	nt.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "needle_notify_deliveries_total",
		Help: "Webhook delivery attempts made by this peer as owner, by result: delivered, failed (retried later), gave_up (the last attempt failed, or the URL is off this peer's allow-list)."},
		[]string{"result"})
	nt.latency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "needle_notify_delivery_seconds",
		Help: "Webhook call latency, to the response or the error.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)})
	reg.MustRegister(nt.deliveries, nt.latency)
	for _, r := range []node.NotifyResult{node.NotifyDelivered, node.NotifyFailed, node.NotifyGaveUp} {
		nt.deliveries.WithLabelValues(r.String())
	}
	return nt
}

// check reports why raw may not be a notify URL on this peer, or nil.
func (nt *notifier) check(raw string) error {
	_, err := nt.target(raw)
	return err
}

// target checks raw against the allow-list and returns the URL to call:
// the one that was checked (checkedURL), not raw.
func (nt *notifier) target(raw string) (*url.URL, error) {
	if len(nt.allow) == 0 {
		return nil, errors.New("webhooks are off on this peer: it has no notify allow-list (needled --notify-allow)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %v", err)
	}
	t, err := nt.allow.Check(u)
	switch {
	case errors.Is(err, allowlist.ErrNotListed):
		return nil, fmt.Errorf("%w (needled --notify-allow)", err)
	case err != nil:
		return nil, fmt.Errorf("%q: %w", raw, err)
	}
	return t, nil
}

// startNotify launches the calls of a Ready. Each goroutine ends with its call
// (bounded by the client's timeout) or with ctx.
func (p *Peer) startNotify(jobs []node.NotifyJob) {
	if p.runCtx.Err() != nil {
		return // stopping: the next owner (or this peer's next run) delivers them
	}
	for _, j := range jobs {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			o := p.notifier.deliver(p.runCtx, j)
			select {
			case p.notifier.out <- o:
			case <-p.runCtx.Done():
			}
		}()
	}
}

// notifyDone hands a finished call to the Node (on the loop).
func (p *Peer) notifyDone(o notifyOut) {
	r := p.node.NotifyDone(o.job, o.err, o.refused || o.gone)
	if r == node.NotifyDropped {
		p.log.Debug("webhook result dropped: no longer the owner", keyGroup, o.job.Group)
		return
	}
	p.notifier.deliveries.WithLabelValues(r.String()).Inc()
	if !o.refused {
		p.notifier.latency.Observe(o.took.Seconds())
	}
	if r == node.NotifyGaveUp {
		p.log.Warn("webhook given up", keyGroup, o.job.Group, "attempts", o.job.Attempt, keyErr, o.err)
	}
}

// deliver POSTs the group to its notify URL and says how it went.
func (nt *notifier) deliver(ctx context.Context, j node.NotifyJob) notifyOut {
	o := notifyOut{job: j.NotifyJob}
	u, err := nt.target(j.URL)
	if err != nil {
		o.err, o.refused = "not delivered by this peer: "+err.Error(), true
		return o
	}
	body, err := json.Marshal(api.NewGroup(j.Group, j.Group.Tasks != nil))
	if err != nil {
		o.err, o.refused = "encoding the group: "+err.Error(), true
		return o
	}
	where := u.Scheme + "://" + u.Host + u.Path // no query: it may hold secrets
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		o.err, o.refused = "POST "+where+": "+err.Error(), true
		return o
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "needle-webhook/1")
	id, ts := WebhookID(j.Group), nt.now().Unix()
	req.Header[HeaderWebhookID] = []string{id} // lower-case as the scheme writes them
	req.Header[HeaderWebhookTimestamp] = []string{strconv.FormatInt(ts, 10)}
	req.Header[HeaderWebhookSignature] = []string{WebhookSignature(nt.key, id, ts, body)}
	req.Header.Set(HeaderAttempt, strconv.Itoa(j.Attempt))
	start := time.Now()
	resp, err := nt.client.Do(req)
	o.took = time.Since(start)
	if err != nil {
		o.err = fmt.Sprintf("POST %s: %v", where, unwrapURLError(err))
		return o
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, notifyExcerpt))
		o.err = fmt.Sprintf("POST %s: status %d: %q", where, resp.StatusCode, strings.ToValidUTF8(string(excerpt), "\uFFFD"))
		o.gone = resp.StatusCode == http.StatusGone // the receiver wants no more calls
		return o
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	return o
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

// WebhookID returns the webhook-id of the delivery of group g as it
// ended: its id and the time it ended, in Unix nanoseconds
// ("g1_1767225600000000000"). Both are replicated state, so every attempt
// and every owner sends the same id, and a group that is retried and ends
// again is a new delivery with a new id.
func WebhookID(g shard.GroupView) string {
	return string(g.ID) + "_" + strconv.FormatInt(g.FinishedAt.UnixNano(), 10)
}

// WebhookKey returns the HMAC key of a notify secret: the decoded bytes of
// "whsec_<base64>", else the secret's own bytes.
func WebhookKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, webhookSecretPrefix)
	if !ok {
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) == 0 {
		return nil, errors.New("a whsec_ secret is followed by the key in standard base64")
	}
	return key, nil
}

// WebhookSignature returns the webhook-signature value of a delivery:
// "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)).
func WebhookSignature(key []byte, id string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}
