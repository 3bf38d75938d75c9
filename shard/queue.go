package shard

// readyQueue orders READY tasks: higher priority first, then submission
// order (FIFO). It is an index-tracking binary heap so that a task leased
// by another replica's proposal can be removed in O(log n).
//
// Each item carries its task's order (priority and seq, neither of which
// changes while the task is queued), so that the heap's comparisons read
// the heap alone: reading them from the tasks cost two cache misses a
// comparison, and a lease from a backlog of 100,000 makes 30 of them.
type readyQueue struct {
	items []readyItem
}

type readyItem struct {
	prio int32
	seq  uint64
	t    *task
}

func (q *readyQueue) Len() int { return len(q.items) }

func (q *readyQueue) less(i, j int) bool { return q.items[i].before(&q.items[j]) }

func (q *readyQueue) swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].t.heapIdx = int32(i)
	q.items[j].t.heapIdx = int32(j)
}

// Push adds t; t must not be queued already.
func (q *readyQueue) Push(t *task) {
	if t.heapIdx >= 0 {
		panic("shard: readyQueue.Push of a queued task " + string(t.id()))
	}
	t.heapIdx = int32(len(q.items))
	q.items = append(q.items, readyItem{prio: t.pol.Priority, seq: t.seq, t: t})
	q.up(int(t.heapIdx))
}

// Pop removes and returns the first task, or nil.
func (q *readyQueue) Pop() *task {
	if len(q.items) == 0 {
		return nil
	}
	t := q.items[0].t
	q.Remove(t)
	return t
}

// Peek returns the first task without removing it, or nil.
func (q *readyQueue) Peek() *task {
	if len(q.items) == 0 {
		return nil
	}
	return q.items[0].t
}

// Remove takes t out of the queue if it is queued.
func (q *readyQueue) Remove(t *task) {
	i := int(t.heapIdx)
	if i < 0 {
		return
	}
	last := len(q.items) - 1
	if i != last {
		q.swap(i, last)
	}
	q.items[last] = readyItem{}
	q.items = q.items[:last]
	t.heapIdx = -1
	if i != last {
		q.down(i)
		q.up(i)
	}
}

// up and down move the item at i to its place through a hole: each
// level writes the item it passes and that item's task (heapIdx), where a
// swap wrote two of each (the tasks' writes are cache misses: down was
// 1.5% of a simulated w3 run). The moves are a swap's, in the same order.
func (q *readyQueue) up(i int) {
	it := q.items[i]
	for i > 0 {
		p := (i - 1) / 2
		if !it.before(&q.items[p]) {
			break
		}
		q.place(i, q.items[p])
		i = p
	}
	q.place(i, it)
}

func (q *readyQueue) down(i int) {
	n := len(q.items)
	it := q.items[i]
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.items[m].before(&it) {
			break
		}
		q.place(i, q.items[m])
		i = m
	}
	q.place(i, it)
}

// before is less for two items.
func (a *readyItem) before(b *readyItem) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	return a.seq < b.seq
}

// place puts it at i.
func (q *readyQueue) place(i int, it readyItem) {
	q.items[i] = it
	it.t.heapIdx = int32(i)
}

// intHeap is a min-heap of task indexes.
type intHeap []int

func (h *intHeap) push(v int) {
	*h = append(*h, v)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p] <= a[i] {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *intHeap) pop() (int, bool) {
	a := *h
	if len(a) == 0 {
		return 0, false
	}
	v := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(a) && a[l] < a[m] {
			m = l
		}
		if r := l + 1; r < len(a) && a[r] < a[m] {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return v, true
}
