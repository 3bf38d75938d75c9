package peer

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/peer/webhook"
	"github.com/needle-mesh/needle/shard"
)

// NotifyConfig is webhook.Config, kept so that programs written against
// package peer compile unchanged.
type NotifyConfig = webhook.Config

// notifier runs the webhook calls the Node hands out (Ready.Notify), one
// goroutine each (the Node bounds how many are out), through the Sender,
// and hands each result back to the loop.
type notifier struct {
	sender *webhook.Sender
	out    chan notifyOut // results, into the loop

	deliveries *prometheus.CounterVec
	latency    prometheus.Histogram
}

// notifyOut is how one delivery ended.
type notifyOut struct {
	job shard.NotifyJob
	webhook.Result
}

func newNotifier(s *webhook.Sender, inflight int, reg *prometheus.Registry) *notifier {
	nt := &notifier{sender: s, out: make(chan notifyOut, inflight+16)}
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
func (nt *notifier) check(raw string) error { return nt.sender.Check(raw) }

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
	r := p.node.NotifyDone(o.job, o.Err, o.Refused || o.Gone)
	if r == node.NotifyDropped {
		p.log.Debug("webhook result dropped: no longer the owner", keyGroup, o.job.Group)
		return
	}
	p.notifier.deliveries.WithLabelValues(r.String()).Inc()
	if !o.Refused {
		p.notifier.latency.Observe(o.Took.Seconds())
	}
	if r == node.NotifyGaveUp {
		p.log.Warn("webhook given up", keyGroup, o.job.Group, "attempts", o.job.Attempt, keyErr, o.Err)
	}
}

// deliver POSTs the group to its notify URL and says how it went.
func (nt *notifier) deliver(ctx context.Context, j node.NotifyJob) notifyOut {
	o := notifyOut{job: j.NotifyJob}
	body, err := json.Marshal(api.NewGroup(j.Group, j.Group.Tasks != nil))
	if err != nil {
		o.Err, o.Refused = "encoding the group: "+err.Error(), true
		return o
	}
	o.Result = nt.sender.Send(ctx, webhook.Message{URL: j.URL, ID: WebhookID(j.Group), Attempt: j.Attempt, Body: body})
	return o
}

// WebhookID returns the webhook-id of the delivery of group g as it
// ended: its id and the time it ended, in Unix nanoseconds
// ("g1_1767225600000000000"). Both are replicated state, so every attempt
// and every owner sends the same id, and a group that is retried and ends
// again is a new delivery with a new id.
func WebhookID(g shard.GroupView) string {
	return string(g.ID) + "_" + strconv.FormatInt(g.FinishedAt.UnixNano(), 10)
}
