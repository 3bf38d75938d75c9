package peer

import (
	"errors"
	"fmt"
	"strings"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// A 503 unavailable says which partition (and group, where the peer that
// answers knows it), why, and that the request did nothing and may be
// retried; the HTTP edge adds Retry-After. It said "api: unavailable;
// peer: unavailable" whatever the cause. The node gives the reason as a
// typed error (*node.UnavailableError, *node.UpgradeError) wrapped with
// ErrUnavailable; here it becomes the message, once, on the peer whose
// node answered: a forwarded request's owner sends it as it is.

// unavailablePrefix opens every such message.
const unavailablePrefix = "partition "

// unavailableMessage is the message of a 503 about partition part (group
// g, "" when not known) for reason.
func unavailableMessage(part int, g shard.GroupID, reason string) string {
	where := fmt.Sprintf("%s%d", unavailablePrefix, part)
	if g != "" {
		where += fmt.Sprintf(" (group %s)", g)
	}
	return fmt.Sprintf("%s is not served now: %s; the request did nothing: retry it", where, reason)
}

// unavailableAPIError is the 503 of a node's reason in err, or nil when
// err carries none.
func unavailableAPIError(err error) *api.Error {
	var up *node.UpgradeError
	var ue *node.UnavailableError
	switch {
	case errors.As(err, &up):
		return api.NewError(api.CodeUnavailable, "", unavailableMessage(up.Partition, "", up.Error()))
	case errors.As(err, &ue):
		return api.NewError(api.CodeUnavailable, "", unavailableMessage(ue.Partition, "", ue.Reason))
	}
	return nil
}

// saysWhy reports whether err is a 503 whose message says why already
// (unavailableMessage's, here or on a forwarded request's owner).
func saysWhy(err error) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.Code == api.CodeUnavailable && strings.HasPrefix(ae.Message, unavailablePrefix)
}

// withGroup names group g in err, a 503 that says why about partition
// part without naming the group (a node's, or an owner's, which knows
// only the partition).
func withGroup(err error, part int, g shard.GroupID) error {
	var ae *api.Error
	if !errors.As(err, &ae) {
		return err
	}
	bare := fmt.Sprintf("%s%d is not", unavailablePrefix, part)
	if !strings.HasPrefix(ae.Message, bare) {
		return err
	}
	return api.NewError(ae.Code, ae.Field, fmt.Sprintf("%s%d (group %s) is not", unavailablePrefix, part, g)+strings.TrimPrefix(ae.Message, bare))
}

// forwardUnavailable is the error of a request about group g forwarded to
// its owner to that answered err: when err is unavailable without a
// reason (the owner did not answer, or it runs a release that does not
// say why), the reason is that.
func (p *Peer) forwardUnavailable(g shard.GroupID, to string, err error) error {
	if !errors.Is(err, api.ErrUnavailable) || saysWhy(err) {
		return err
	}
	var ae *api.Error
	reason := fmt.Sprintf("its owner %s answered unavailable without saying why (it runs an older release)", to)
	if !errors.As(err, &ae) {
		reason = fmt.Sprintf("its owner %s does not answer (%s)", to, strings.TrimPrefix(err.Error(), api.ErrUnavailable.Error()+": "))
	}
	return api.NewError(api.CodeUnavailable, "", unavailableMessage(p.node.PartitionOf(g), g, reason))
}
