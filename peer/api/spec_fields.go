package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/needle-mesh/needle/shard"
)

// maxRequire bounds the labels one task may require.
const maxRequire = 32

// placement checks and sets a task's require (sorted, duplicates dropped)
// and pin. A selector that is not key=value, or two values for one key (no
// peer could match), is a field error naming it.
func placement(ts *shard.TaskSpec, require []string, pin, path string, lim Limits) error {
	if len(require) > maxRequire {
		return fieldErr(join(path, "require"), "%d labels exceed the limit of %d", len(require), maxRequire)
	}
	keys := make(map[string]int, len(require))
	for i, kv := range require {
		field := join(path, "require["+strconv.Itoa(i)+"]")
		if err := shard.ValidateLabel(kv); err != nil {
			return fieldErr(field, "%v", err)
		}
		k, v, _ := strings.Cut(kv, "=")
		if j, dup := keys[k]; dup && require[j] != kv {
			return fieldErr(field, "label %q asks for %s=%s and %s: no peer can match", k, k, v, require[j])
		}
		keys[k] = i
	}
	if len(require) > 0 {
		ts.Require = slices.Compact(slices.Sorted(slices.Values(require)))
	}
	switch {
	case len(pin) > maxNameLen:
		return fieldErr(join(path, "pin"), "longer than %d bytes: not a peer id", maxNameLen)
	case pin != "" && (strings.ContainsAny(pin, " \t\n") || (lim.ValidPeer != nil && !lim.ValidPeer(pin))):
		return fieldErr(join(path, "pin"), "%q is not a peer id: no peer could ever run the task", pin)
	}
	ts.Pin = pin
	return nil
}

// checkForgottenPins refuses a spec with a task pinned to a forgotten peer
// (lim.Forgotten), naming the first such task's pin: the owner would fail
// it at its next timer pass (shard.FailPinnedTo), or the schedule at every
// firing, where the client can be told now. One call for all the pins.
func checkForgottenPins(spec *shard.GroupSpec, lim Limits) error {
	if lim.Forgotten == nil {
		return nil
	}
	var pins []string
	seen := map[string]bool{}
	for i := range spec.Tasks {
		if p := spec.Tasks[i].Pin; p != "" && !seen[p] {
			seen[p] = true
			pins = append(pins, p)
		}
	}
	if len(pins) == 0 {
		return nil
	}
	gone := lim.Forgotten(pins)
	if len(gone) == 0 {
		return nil
	}
	for i := range spec.Tasks {
		if p := spec.Tasks[i].Pin; p != "" && slices.Contains(gone, p) {
			field := CorePath(spec, &shard.FieldError{Task: i, Field: "pin"})
			return fieldErr(field, "peer %q was forgotten (needle forget) and never rejoins: no peer can ever run the task", p)
		}
	}
	return nil
}

// toSpec checks the common task fields and converts them.
func (f *rawFields) toSpec(path string, lim Limits) (shard.TaskSpec, error) {
	ts := shard.TaskSpec{Handler: f.Handler, Priority: f.Priority}
	switch {
	case f.Handler == "":
		return ts, fieldErr(join(path, "handler"), "required")
	case len(f.Handler) > maxNameLen:
		return ts, fieldErr(join(path, "handler"), "longer than %d bytes", maxNameLen)
	case lim.HasHandler != nil && !lim.HasHandler(f.Handler):
		return ts, fieldErr(join(path, "handler"), "unknown handler %q", f.Handler)
	case lim.HasHandler == nil && ValidHandlerName(f.Handler) != nil:
		return ts, fieldErr(join(path, "handler"), "%v", ValidHandlerName(f.Handler))
	}
	var err error
	if ts.Payload, err = payload(f.Payload, path, "payload", lim.MaxPayload); err != nil {
		return ts, err
	}
	if ts.Timeout, err = duration(f.Timeout, path, "timeout", shard.MaxTimeout); err != nil {
		return ts, err
	}
	if ts.Timeout > 0 && ts.Timeout < shard.MinTimeout {
		return ts, fieldErr(join(path, "timeout"), "%s", shard.MinTimeoutError(ts.Timeout))
	}
	if ts.Delay, err = duration(f.Delay, path, "delay", shard.MaxDelay); err != nil {
		return ts, err
	}
	ts.Retry, err = retry(f.Retry, path, "retry", lim)
	return ts, err
}

// payload compacts a raw payload (field of path); absent or null is the
// bytes "null". A payload without whitespace is compact already: it is
// taken as it is (a decoder's json.RawMessage is valid JSON, and its own).
func payload(raw json.RawMessage, path, field string, max int) ([]byte, error) {
	if len(raw) == 0 {
		return []byte("null"), nil
	}
	if !utf8.Valid(raw) {
		return nil, notUTF8(join(path, field))
	}
	if bytes.IndexAny(raw, " \t\n\r") < 0 && len(raw) <= max {
		return raw, nil
	}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fieldErr(join(path, field), "malformed JSON")
	}
	if buf.Len() > max {
		return nil, &FieldError{Field: join(path, field), Message: fmt.Sprintf("%d bytes exceed the limit of %d", buf.Len(), max), Err: ErrPayloadTooLarge}
	}
	return buf.Bytes(), nil
}

// notUTF8 is the error of raw JSON (a payload, an item, a result) that is
// not UTF-8. encoding/json keeps such bytes as they are in a
// json.RawMessage, and a peer stored and answered them: every strict
// client (Python's json) then failed on each page holding the task.
func notUTF8(field string) error {
	return fieldErr(field, "not valid UTF-8 (JSON text is UTF-8, RFC 8259)")
}

// duration parses a non-negative Go duration of at most max (field of
// path); "" is 0.
func duration(s, path, field string, max time.Duration) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fieldErr(join(path, field), "invalid duration %q; want a Go duration like \"30s\"", s)
	}
	if d < 0 {
		return 0, fieldErr(join(path, field), "negative duration %q", s)
	}
	if d > max {
		return 0, fieldErr(join(path, field), "%s is over the maximum of %s", s, max)
	}
	return d, nil
}

// retry decodes and defaults a retry policy (see the package doc).
func retry(raw json.RawMessage, path, field string, lim Limits) (shard.Retry, error) {
	r := shard.Retry{MaxAttempts: 1, Backoff: defaultBackoff}
	if len(raw) == 0 {
		r.MaxBackoff = max(r.Backoff, defaultBackoffMax)
		return r, nil
	}
	path = join(path, field)
	var rr rawRetry
	if err := decodeStrict(raw, &rr, path); err != nil {
		return r, err
	}
	if rr.MaxAttempts != nil {
		if n := *rr.MaxAttempts; n < 1 || n > lim.MaxAttempts {
			return r, fieldErr(join(path, "max_attempts"), "%d out of range [1, %d]", n, lim.MaxAttempts)
		}
		r.MaxAttempts = *rr.MaxAttempts
	}
	var err error
	if rr.Backoff != "" {
		if r.Backoff, err = duration(rr.Backoff, path, "backoff", shard.MaxBackoff); err != nil {
			return r, err
		}
	}
	r.MaxBackoff = max(r.Backoff, defaultBackoffMax)
	if rr.MaxBackoff != "" {
		if r.MaxBackoff, err = duration(rr.MaxBackoff, path, "max_backoff", shard.MaxBackoff); err != nil {
			return r, err
		}
		if r.MaxBackoff < r.Backoff {
			return r, fieldErr(join(path, "max_backoff"), "%s is below the backoff %s", r.MaxBackoff, r.Backoff)
		}
	}
	return r, nil
}

// validateCore runs the core's own validation of a spec
// (shard.GroupSpec.Validate) and maps a *shard.FieldError back to the JSON
// path. This is the single call site for shard's validation. The group id
// is assigned later, by the Backend, so a copy with a placeholder id is
// validated; the core validates the real spec again.
func validateCore(spec *shard.GroupSpec) error {
	cp := *spec
	if cp.ID == "" {
		cp.ID = "unassigned"
	}
	if cp.Mode == shard.ModeBroadcast && len(cp.Tasks) == 1 && cp.Tasks[0].Pin == "" {
		// The peer that takes the request pins a copy to each matching peer.
		cp.Tasks = slices.Clone(cp.Tasks)
		cp.Tasks[0].Pin = "unassigned"
	}
	err := cp.Validate()
	if err == nil {
		return nil
	}
	var fe *shard.FieldError
	if errors.As(err, &fe) {
		return &FieldError{Field: CorePath(spec, fe), Message: fe.Message}
	}
	return &FieldError{Message: err.Error()}
}
