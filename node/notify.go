package node

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// Webhook deliveries, the Node's side (pure). A group with a notify URL
// that reaches a terminal state is pending in its partition's replicated
// state (shard/notify.go). The partition's owner hands due deliveries to
// the driver in Ready.Notify (at most NodeConfig.NotifyInflight
// outstanding, looked for once per Raft tick); the driver makes the call
// and reports with NotifyDone, which proposes the attempt (EvNotified)
// through the partition's Raft log. A result that comes back after this
// node lost the partition is dropped: the next owner delivers again
// (delivery is at least once; receivers dedupe on the group id).

// NotifyJob is one webhook delivery for the driver to make.
type NotifyJob struct {
	shard.NotifyJob
	// Group is the group as it stands when the delivery is handed out,
	// the body of the call: with its tasks when it has at most
	// NotifyMaxTasks of them, else without (Tasks nil).
	Group shard.GroupView
}

// NotifyMaxTasks is the most tasks a webhook body lists. A bigger group's
// body is its summary (state, counts, total, tasks_omitted): a receiver
// of a 100,000-task group wants to know it finished, not 30 MB in every
// attempt, and reads the tasks with GET /v1/groups/{id}.
const NotifyMaxTasks = 1000

// NotifyResult is what NotifyDone made of a delivery attempt.
type NotifyResult uint8

const (
	NotifyDropped   NotifyResult = iota // this node no longer owns the group's partition: nothing proposed
	NotifyDelivered                     // the receiver accepted it
	NotifyFailed                        // failed; retried after a backoff
	NotifyGaveUp                        // failed for the last time (or refused): no more attempts
)

var notifyResultNames = [...]string{"dropped", "delivered", "failed", "gave_up"}

func (r NotifyResult) String() string {
	if int(r) < len(notifyResultNames) {
		return notifyResultNames[r]
	}
	return "NotifyResult(" + strconv.Itoa(int(r)) + ")"
}

// DefaultNotifyInflight is NodeConfig.NotifyInflight when it is 0.
const DefaultNotifyInflight = 16

func (n *Node) notifyLimit() int {
	if n.cfg.NotifyInflight > 0 {
		return n.cfg.NotifyInflight
	}
	return DefaultNotifyInflight
}

// notifyDue hands out the due deliveries of the partitions this node
// serves, up to the in-flight limit, starting with a different partition
// each time so that none starves the others.
func (n *Node) notifyDue() {
	free := n.notifyLimit() - n.notifying
	start := n.notifyNext
	n.notifyNext = (n.notifyNext + 1) % len(n.parts)
	// The partitions held, from the first at or after start round to it
	// (the order a walk over every partition number gave).
	first, _ := slices.BinarySearch(n.held, start)
	for k := 0; k < len(n.held) && free > 0; k++ {
		p := n.parts[n.held[(first+k)%len(n.held)]]
		if !p.serving || p.shard.NotifyPending() == 0 {
			continue
		}
		for _, j := range p.shard.NotifyDue(n.now, free) {
			v, err := p.shard.GroupSummary(j.Group)
			if err == nil && v.Total <= NotifyMaxTasks {
				v, err = p.shard.Group(j.Group)
			}
			if err != nil {
				panic(fmt.Sprintf("peer: partition %d: NotifyDue handed out %s, which it does not hold: %v", p.id, j.Group, err))
			}
			n.rd.Notify = append(n.rd.Notify, NotifyJob{NotifyJob: j, Group: v})
			n.notifying++
			free--
		}
	}
}

// NotifyDone reports how delivery j ended: errMsg is "" when the receiver
// accepted it (2xx), else why not; refused means this peer will not call
// the URL at all (not on its allow-list): the delivery gives up at once.
// The owner proposes the attempt; the result says what it proposed.
func (n *Node) NotifyDone(j shard.NotifyJob, errMsg string, refused bool) NotifyResult {
	if n.notifying > 0 {
		n.notifying--
	}
	p := n.parts[n.PartitionOf(j.Group)]
	if p == nil || !p.serving {
		return NotifyDropped
	}
	var ev shard.Event
	if refused {
		if errMsg == "" {
			errMsg = "refused"
		}
		ev = p.shard.NotifyRefused(n.now, j, errMsg)
	} else {
		ev = p.shard.Notified(n.now, j, errMsg)
	}
	n.holdNote(p, ev)
	switch {
	case ev.Error == "":
		return NotifyDelivered
	case ev.Permanent:
		return NotifyGaveUp
	}
	return NotifyFailed
}

// notifyDefer is how long a delivery's record (EvNotified) waits for an
// entry of its partition to ride in before it goes alone. A delivery
// counts for nothing until its record applies (the group stays in flight
// meanwhile, so it is not handed out again); a leadership lost first
// drops the record, and the next owner delivers again, as it does for a
// call under way (at least once). What it buys: under load a webhook's
// record rides an entry that goes anyway, where alone it took one entry
// of its own per delivery (simulator, mixed: 847 of 16,188 entries).
const notifyDefer = 500 * time.Millisecond

// holdNote holds delivery record ev of p back for notifyDefer, or until
// the partition's next entry takes it (flush).
func (n *Node) holdNote(p *partition, ev shard.Event) {
	if len(p.notes) == 0 {
		p.notesDue = n.now.Add(notifyDefer)
		n.dueBy(p, p.notesDue)
	}
	p.notes = append(p.notes, ev)
}
