package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// ErrPayloadTooLarge is returned (wrapped) when a request body or a task's
// payload exceeds its limit. The HTTP edge answers 413 payload_too_large.
var ErrPayloadTooLarge = errors.New("api: payload too large")

// Bounds on strings of a submission; a longer value is a 400.
const (
	maxNameLen        = 256  // task name, handler name
	maxKeyLen         = 512  // idempotency key
	maxTraceLen       = 256  // trace id
	maxDepsLen        = 1024 // deps of one task
	defaultBackoff    = time.Second
	defaultBackoffMax = 2 * time.Minute
)

// Limits bounds what a submission may contain. The zero value of a field
// means its default (see DefaultLimits).
type Limits struct {
	// MaxBody is the size of a request body in bytes; default 1 MiB. A
	// larger body is a 413.
	MaxBody int64
	// MaxTasks is the number of tasks of one group; default 100,000. More is
	// a 400 naming "tasks" (or "stages").
	MaxTasks int
	// MaxPayload is the size of one task's payload in bytes, after
	// compaction; default 256 KiB. A larger payload is a 413 naming the
	// payload's field.
	MaxPayload int
	// MaxAttempts bounds retry.max_attempts; default 1,000.
	MaxAttempts int
	// HasHandler reports whether a handler name is registered; nil accepts
	// every non-empty name.
	HasHandler func(name string) bool
	// MinEvery is the shortest interval between two ticks of a schedule
	// ("every", a cron expression, @every); default 1 s.
	MinEvery time.Duration
	// MaxFiredPerMinute bounds the tasks one schedule may fire in a minute
	// (tasks per firing x ticks per minute); default 100,000, a group of
	// the default --max-tasks once a minute.
	MaxFiredPerMinute int
	// Notify checks a "notify" webhook URL (scheme, allow-list) and says
	// why it is refused; nil refuses every notify URL (this peer has no
	// allow-list).
	Notify func(url string) error
	// ValidPeer reports whether id can name a peer (the node's check of a
	// member's id: a libp2p peer id): a task's "pin" that cannot is a 400
	// naming it, as no peer could ever run the task. Nil accepts any id
	// without whitespace.
	ValidPeer func(id string) bool
	// Forgotten returns those of ids (the distinct pins of one request,
	// well-formed) that name a peer forgotten for good (needle forget): a
	// pin to one is a 400 naming it, as that peer can never run the task
	// again. A well-formed id that is not a member yet stays accepted (a
	// peer may join later). Nil forgets none.
	Forgotten func(ids []string) []string
}

// DefaultLimits returns the limits used when a field of Limits is zero.
func DefaultLimits() Limits {
	return Limits{MaxBody: 1 << 20, MaxTasks: 100_000, MaxPayload: 256 << 10, MaxAttempts: 1000, MinEvery: time.Second,
		MaxFiredPerMinute: 100_000}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxBody <= 0 {
		l.MaxBody = d.MaxBody
	}
	if l.MaxTasks <= 0 {
		l.MaxTasks = d.MaxTasks
	}
	if l.MaxPayload <= 0 {
		l.MaxPayload = d.MaxPayload
	}
	if l.MaxAttempts <= 0 {
		l.MaxAttempts = d.MaxAttempts
	}
	if l.MinEvery <= 0 {
		l.MinEvery = d.MinEvery
	}
	if l.MaxFiredPerMinute <= 0 {
		l.MaxFiredPerMinute = d.MaxFiredPerMinute
	}
	return l
}

// FieldError says which part of a request is invalid. Field is the JSON
// path of the value ("tasks[3].deps", "retry.backoff"), or "" when the
// request as a whole is malformed. Err, when set, is the error kind
// (ErrPayloadTooLarge); otherwise the error is an invalid argument.
type FieldError struct {
	Field   string
	Message string
	Err     error
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Unwrap returns the error kind, if any.
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// join appends a field name to a JSON path.
func join(path, field string) string {
	switch {
	case path == "":
		return field
	case field == "":
		return path
	}
	return path + "." + field
}

// readBody reads at most max bytes of r; more is ErrPayloadTooLarge.
func readBody(r io.Reader, max int64) ([]byte, error) {
	var room int64 = 512 // as io.ReadAll starts
	if b, ok := r.(sizedBody); ok && b.size > 0 {
		// The length the client announced, and one byte to read the end
		// into: a body is read into one allocation where doubling from
		// 512 bytes took twice its size. A length that lies costs at
		// most maxPresized (or max) until the body ends.
		room = min(b.size, max, maxPresized) + 1
	}
	data, err := readAll(make([]byte, 0, room), io.LimitReader(r, max+1))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) || int64(len(data)) > max {
		return nil, &FieldError{Message: fmt.Sprintf("request body exceeds %d bytes", max), Err: ErrPayloadTooLarge}
	}
	if err != nil {
		return nil, fmt.Errorf("api: read body: %w", err)
	}
	return data, nil
}

// sizedBody is a request body with the length its request announced
// (http.Request.ContentLength; -1 when unknown), for readBody.
type sizedBody struct {
	io.Reader
	size int64
}

// maxPresized bounds the buffer readBody allocates by a body's announced
// length before reading it: a client that announces more than it sends
// holds no more of a peer's memory per request than one that sends
// 64 KB (a 1,000-task W1 group is about 55 KB); a larger body grows from
// there as it arrives.
const maxPresized = 64 << 10

// readAll is io.ReadAll reading into data's room first.
func readAll(data []byte, r io.Reader) ([]byte, error) {
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return data, err
		}
	}
}

// decodeStrict decodes exactly one JSON value from data into v, rejecting
// unknown fields; errors name path.
func decodeStrict(data []byte, v any, path string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, path)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &FieldError{Field: path, Message: "unexpected data after the JSON value"}
	}
	return nil
}

// jsonError turns an encoding/json error into a *FieldError naming path.
func jsonError(err error, path string) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return &FieldError{Field: path, Message: "empty body; want a JSON object"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &FieldError{Field: path, Message: "malformed JSON: unexpected end of input"}
	case errors.As(err, &se):
		return &FieldError{Field: path, Message: fmt.Sprintf("malformed JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))}
	case errors.As(err, &te):
		return &FieldError{Field: join(path, te.Field), Message: fmt.Sprintf("want %s, got %s", kindName(te.Type), te.Value)}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if u, uerr := strconv.Unquote(name); uerr == nil {
			name = u
		}
		return &FieldError{Field: join(path, name), Message: "unknown field"}
	}
	return &FieldError{Field: path, Message: "malformed JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
}

// kindName names a Go type the way a JSON user thinks of it.
func kindName(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprintf("an integer (%s)", t.Kind())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("a non-negative integer (%s)", t.Kind())
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Pointer:
		return kindName(t.Elem())
	}
	return t.String()
}
