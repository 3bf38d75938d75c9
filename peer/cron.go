package peer

import (
	"time"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// ScheduleNext computes a schedule's next tick (robfig/cron with IANA time
// zones, or aligned "every" intervals). It is the shard.Config.Next the
// runtime and the simulator give every partition: only the owner calls it,
// when it proposes, and the events carry its answers to the replicas.
func ScheduleNext(spec *shard.ScheduleSpec, after time.Time) (time.Time, error) {
	return api.ScheduleNext(spec, after)
}
