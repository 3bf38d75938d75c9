package shard

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"time"
)

// AppendScheduleSpec appends the encoding of sp to dst:
//
//	sched = id:str name:str cron:str every:varint tz:str overlap:byte
//	        misfire:byte paused:byte group:group
func AppendScheduleSpec(dst []byte, sp *ScheduleSpec) []byte {
	dst = AppendString(dst, string(sp.ID))
	dst = AppendString(dst, sp.Name)
	dst = AppendString(dst, sp.Cron)
	dst = binary.AppendVarint(dst, int64(sp.Every))
	dst = AppendString(dst, sp.TZ)
	paused := byte(0)
	if sp.Paused {
		paused = 1
	}
	dst = append(dst, byte(sp.Overlap), byte(sp.Misfire), paused)
	return AppendGroupSpec(dst, &sp.Group)
}

func decodeScheduleSpec(d *Decoder, sp *ScheduleSpec) {
	sp.ID = ScheduleID(d.String())
	d.Field("id")
	sp.Name = d.String()
	d.Field("name")
	sp.Cron = d.String()
	d.Field("cron")
	sp.Every = time.Duration(d.Varint())
	d.Field("every")
	sp.TZ = d.String()
	d.Field("tz")
	if sp.Overlap = Overlap(d.Byte()); d.err == nil && sp.Overlap != OverlapSkip && sp.Overlap != OverlapAllow {
		d.Fail("unknown overlap %d", uint8(sp.Overlap))
	}
	d.Field("overlap")
	if sp.Misfire = Misfire(d.Byte()); d.err == nil && sp.Misfire != MisfireOnce && sp.Misfire != MisfireSkip {
		d.Fail("unknown misfire %d", uint8(sp.Misfire))
	}
	d.Field("misfire")
	switch p := d.Byte(); {
	case d.err != nil:
	case p > 1:
		d.Fail("bad paused %d", p)
	default:
		sp.Paused = p == 1
	}
	if !d.Field("paused") {
		return
	}
	decodeGroupSpec(d, &sp.Group)
	d.within("group")
}

// appendSchedules appends the schedules of a snapshot (version 2).
func (s *Shard) appendSchedules(dst []byte) []byte {
	ids := slices.Sorted(maps.Keys(s.schedules))
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for _, id := range ids {
		sc := s.schedules[id]
		dst = AppendScheduleSpec(dst, &sc.spec)
		dst = AppendTime(dst, sc.next)
		dst = AppendTime(dst, sc.created)
		dst = binary.AppendUvarint(dst, uint64(len(sc.firings)))
		for _, f := range sc.firings {
			dst = AppendTime(dst, f.at)
			dst = AppendString(dst, string(f.group))
			skipped := byte(0)
			if f.skipped {
				skipped = 1
			}
			dst = append(dst, skipped)
		}
	}
	return dst
}

func decodeSchedules(d *Decoder) (map[ScheduleID]*schedule, error) {
	n := d.Count(12)
	out := make(map[ScheduleID]*schedule, n)
	for range n {
		sc := &schedule{}
		decodeScheduleSpec(d, &sc.spec)
		sc.next = d.Time()
		sc.created = d.Time()
		m := d.Count(3)
		for range m {
			f := firing{at: d.Time(), group: GroupID(d.String()), skipped: d.Byte() == 1}
			sc.firings = append(sc.firings, f)
		}
		if err := d.Err(); err != nil {
			return nil, fmt.Errorf("shard: restore: schedules: %w", err)
		}
		if err := sc.spec.ValidateStored(); err != nil {
			return nil, fmt.Errorf("shard: restore: schedule %s: %v: %w", sc.spec.ID, err, ErrCodec)
		}
		if out[sc.spec.ID] != nil {
			return nil, fmt.Errorf("shard: restore: schedule %s twice: %w", sc.spec.ID, ErrCodec)
		}
		out[sc.spec.ID] = sc
	}
	return out, nil
}
