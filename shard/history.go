package shard

// A task's history is most often the same three events: its submission,
// one lease and its success. Such a history says nothing its task does
// not (its group's creation, its round, holder, start and finish), so a
// SUCCEEDED task whose history is exactly that keeps none (plain) and
// makes it when asked. A peer under W1 holds millions of finished tasks:
// 144 bytes of events each, and the room newTasks gave a group's
// histories is freed when the group finishes (settleGroup).

// plainHistories is false only in tests that compare a state folded with
// plain histories against one that keeps every history.
var plainHistories = true

// plainLen is the length of a plain task's history.
const plainLen = 3

// histLen returns the number of events in t's history.
func (t *task) histLen() int {
	if t.plain {
		return plainLen
	}
	return len(t.history)
}

// event returns the i-th event of t's history (0-based).
func (t *task) event(i int) taskEvent {
	if !t.plain {
		return t.history[i]
	}
	return t.plainEvent(i)
}

// plainEvent returns the i-th event of a plain history, from t's state.
func (t *task) plainEvent(i int) taskEvent {
	switch i {
	case 0:
		return taskEvent{typ: EvSubmitted, at: stampOf(t.g.created)}
	case 1:
		return taskEvent{typ: EvLeased, at: t.started, round: t.round, holder: t.holder}
	}
	return taskEvent{typ: EvSucceeded, at: t.finished, round: t.round, holder: t.holder}
}

// addEvent appends h to t's history, making a plain history first.
func (t *task) addEvent(h taskEvent) {
	if t.plain {
		t.history = make([]taskEvent, plainLen, plainLen+1)
		for i := range t.history {
			t.history[i] = t.plainEvent(i)
		}
		t.plain = false
	}
	t.history = append(t.history, h)
}

// settle drops the history of a SUCCEEDED task when its state tells it
// (plain), and otherwise moves it, when it has one, to an allocation of
// its exact length: off its group's shared room (newTasks) and without
// the spare capacity of appends.
func (t *task) settle() {
	if t.plain || len(t.history) == 0 || t.makePlain() {
		return
	}
	h := make([]taskEvent, len(t.history))
	copy(h, t.history)
	t.history = h
}

// makePlain drops t's history when it is the plain one, and reports
// whether it did.
func (t *task) makePlain() bool {
	if !plainHistories || t.state != Succeeded || len(t.history) != plainLen {
		return false
	}
	for i := range plainLen {
		if t.history[i] != t.plainEvent(i) {
			return false
		}
	}
	t.history, t.plain = nil, true
	return true
}

// settleGroup settles the histories of a finished group's tasks, so that
// the room newTasks made for them is freed. The histories kept move to
// one allocation, each at its exact length (an append moves it out), not
// one a task: the group's tasks are removed together.
func settleGroup(g *group) {
	n := 0
	for _, t := range g.tasks {
		if !t.plain && len(t.history) > 0 && !t.makePlain() {
			n += len(t.history)
		}
	}
	room := make([]taskEvent, n)
	for _, t := range g.tasks {
		if k := len(t.history); !t.plain && k > 0 {
			copy(room, t.history)
			t.history, room = room[:k:k], room[k:]
		}
	}
}
