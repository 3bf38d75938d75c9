package shard

import (
	"fmt"
	"unicode/utf8"
)

// MaxErrorBytes bounds an outcome's error text as the log keeps it. A
// longer one (a worker's whole traceback, a response body in an exception)
// keeps its first and last parts around a note of what was cut: where a
// message begins and where a traceback ends say the most.
const MaxErrorBytes = 32 << 10

// MaxResultBytes bounds an outcome's result, whatever a peer's limit on
// its handlers' results: an outcome is one event, and its entry must fit
// the log's largest record.
const MaxResultBytes = 8 << 20

// Bound makes an outcome fit the log, whoever reported it (a handler, an
// external worker, another peer): an error over MaxErrorBytes is cut in
// the middle, and a result over MaxResultBytes fails the task for good,
// as a peer's own --max-result does.
func (o *Outcome) Bound() {
	if o.OK && len(o.Result) > MaxResultBytes {
		o.OK, o.Permanent = false, true
		o.Error = fmt.Sprintf("result of %d bytes is over the mesh's limit of %d", len(o.Result), MaxResultBytes)
		o.Result = nil
	}
	o.Error = CutError(o.Error)
}

// CutError returns s when it is at most MaxErrorBytes long, and otherwise
// its first and last parts (cut on character boundaries) around a note of
// how many bytes were left out, MaxErrorBytes in all at most.
func CutError(s string) string {
	if len(s) <= MaxErrorBytes {
		return s
	}
	const keep = MaxErrorBytes/2 - 32 // each side; the note takes under 64
	head := keep
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	tail := len(s) - keep
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + fmt.Sprintf(" [... %d bytes cut ...] ", tail-head) + s[tail:]
}
