package node

import "testing"

// A victim leases to a thief as its heartbeats name it, and before one
// came as its steal request names it, but only to the sender itself: at
// 1,000 peers most thieves' heartbeats have not reached a victim minutes
// into the mesh's life, and refusing them turned away 700 of 999 thieves.
func TestStealHolder(t *testing.T) {
	for _, c := range []struct {
		mb     *member
		holder string
		want   string
	}{
		{&member{id: "p2", boot: "b7"}, "p2#b9", "p2#b7"}, // the heartbeat's incarnation wins
		{&member{id: "p2"}, "p2#b9", "p2#b9"},             // no heartbeat yet: the request's
		{&member{id: "p2"}, "", ""},                       // an older thief names none
		{&member{id: "p2"}, "p3#b9", ""},                  // another peer's incarnation
		{&member{id: "p2"}, "p2#", ""},
		{&member{id: "p2"}, "p2", ""},
		{nil, "p2#b9", ""}, // not a member
	} {
		if got := stealHolder(c.mb, "p2", c.holder); got != c.want {
			t.Errorf("stealHolder(%+v, %q) = %q; want %q", c.mb, c.holder, got, c.want)
		}
	}
}
