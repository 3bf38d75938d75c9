package steal

// GrantSize is the victim's side of a steal: how many of the asked tasks to
// grant, given its READY tasks and its own free worker slots right now.
//
// The victim keeps what its free slots will take at once and splits the
// excess, excess = ready - ownFree, with the thief: it grants ceil(excess/2),
// at most asked, and 0 when ready <= ownFree. Half, because the victim's
// slots and the thief's are both about to drain the same excess, so halving
// it evens out the two queues without handing the thief work the victim would
// have started first; several thieves asking in turn each take half of what
// is left, so the victim never empties itself in one grant. Rounding up
// rather than down matters at the tail: with one task in excess, floor would
// strand it behind the victim's busy slots while the thief's slot idles
// (docs/design.md W3: one stranded 400 ms task is ~0.14 LB). Stolen tasks are
// leased, not READY, so they cannot bounce back.
func GrantSize(ready, ownFree, asked int) int {
	ownFree = max(ownFree, 0)
	if ready <= ownFree || asked <= 0 {
		return 0
	}
	excess := ready - ownFree
	return min((excess+1)/2, asked)
}
