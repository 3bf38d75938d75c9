package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/needle-mesh/needle/shard"
)

// ErrUnavailable is returned by a Backend when no owner of the group is
// reachable; the request did nothing. HTTP 503 unavailable.
var ErrUnavailable = errors.New("api: unavailable")

// ErrConflict is returned by a Backend when the request conflicts with the
// current state (e.g. an idempotency key reused with a different body).
// HTTP 409 conflict.
var ErrConflict = errors.New("api: conflict")

// ErrInsufficientStorage is returned by a Backend when the owner of the
// group is short of disk space and takes no new work; the request did
// nothing. HTTP 507 insufficient_storage.
var ErrInsufficientStorage = errors.New("api: insufficient storage")

// Error is an error response of the API: the "error" object of the body
// plus the HTTP status. The client returns it for every 4xx and 5xx.
type Error struct {
	Status  int    `json:"-"`               // HTTP status code
	Code    string `json:"code"`            // invalid_argument, not_found, ...
	Message string `json:"message"`         // human-readable; starts with Field when set
	Field   string `json:"field,omitempty"` // JSON path or parameter at fault
}

func (e *Error) Error() string {
	return strconv.Itoa(e.Status) + " " + e.Code + ": " + e.Message
}

// The error vocabulary: every failure the API reports is one of a few kinds,
// each a code (CodeInvalidArgument, CodeNotFound, ...) with its HTTP status.
// The HTTP edge writes it as the error body; a request forwarded over the
// mesh answers it as code, field and message, and the forwarding peer
// returns it as an *Error, so the kind, the field and the text an owner
// chose reach the client unchanged, whichever peer it asked.

// errorKind is one row of the error table.
type errorKind struct {
	match  func(error) bool
	status int
	code   string
}

func is(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

func isFieldError(err error) bool {
	var fe *FieldError
	var sfe *shard.FieldError
	return errors.As(err, &fe) || errors.As(err, &sfe)
}

func isConflict(err error) bool {
	var ce *shard.ConflictError
	return errors.As(err, &ce)
}

// errorTable maps error kinds to HTTP responses, first match wins. Anything
// that matches no row is a 500 internal, and only those are logged.
var errorTable = []errorKind{
	{is(ErrPayloadTooLarge), http.StatusRequestEntityTooLarge, CodePayloadTooLarge},
	{is(shard.ErrNotFound), http.StatusNotFound, CodeNotFound},
	{isFieldError, http.StatusBadRequest, CodeInvalidArgument},
	{is(ErrLeaseLost), http.StatusConflict, CodeLeaseLost},
	{is(ErrConflict), http.StatusConflict, CodeConflict},
	{is(shard.ErrRevision), http.StatusPreconditionFailed, CodePreconditionFailed},
	{isConflict, http.StatusConflict, CodeConflict},
	{is(ErrUnavailable), http.StatusServiceUnavailable, CodeUnavailable},
	{is(ErrInsufficientStorage), http.StatusInsufficientStorage, CodeInsufficientStorage},
	{is(context.DeadlineExceeded), http.StatusServiceUnavailable, CodeUnavailable},
	{is(context.Canceled), http.StatusServiceUnavailable, CodeUnavailable},
}

// codeSentinel is the sentinel an *Error of a code matches with errors.Is,
// so callers test a forwarded answer the way they test a local error.
var codeSentinel = map[string]error{
	CodeNotFound:           shard.ErrNotFound,
	CodeConflict:           ErrConflict,
	CodeLeaseLost:          ErrLeaseLost,
	CodeUnavailable:        ErrUnavailable,
	CodePayloadTooLarge:    ErrPayloadTooLarge,
	CodePreconditionFailed: shard.ErrRevision,

	CodeInsufficientStorage: ErrInsufficientStorage,
}

// Is reports whether target is the sentinel of e's code (ErrUnavailable
// for unavailable, shard.ErrNotFound for not_found, ...).
func (e *Error) Is(target error) bool {
	s, ok := codeSentinel[e.Code]
	return ok && s == target
}

// ErrorOf classifies err in the vocabulary: its status, code, field and
// full message. An *Error in err's chain is returned as it is; an error of
// no kind is a 500 internal whose message is err's text (the HTTP edge
// hides it from clients and logs it). nil is nil.
func ErrorOf(err error) *Error {
	if err == nil {
		return nil
	}
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	for _, k := range errorTable {
		if k.match(err) {
			return &Error{Status: k.status, Code: k.code, Message: oneLine(err.Error()), Field: errField(err)}
		}
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
}

// NewError returns the error of a code, as another peer answered it: its
// status is the code's (an unknown code is a 500), field and message as
// given.
func NewError(code, field, msg string) *Error {
	return &Error{Status: StatusOf(code), Code: code, Message: oneLine(msg), Field: field}
}

// oneLine is an error's text on one line: the errors an error joins
// (errors.Join: one a line) in order, each once, "; " between them. A
// 503 said "api: unavailable\napi: unavailable\npeer: unavailable".
func oneLine(msg string) string {
	if !strings.Contains(msg, "\n") {
		return msg
	}
	var parts []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" && !slices.Contains(parts, l) {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

// StatusOf returns the HTTP status of an error code; an unknown code is
// 500.
func StatusOf(code string) int {
	switch code {
	case CodeInvalidArgument:
		return http.StatusBadRequest
	case CodeUnauthenticated:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeMethodNotAllow:
		return http.StatusMethodNotAllowed
	case CodeConflict, CodeLeaseLost:
		return http.StatusConflict
	case CodePreconditionFailed:
		return http.StatusPreconditionFailed
	case CodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeUnsupportedType:
		return http.StatusUnsupportedMediaType
	case CodeRateLimited:
		return http.StatusTooManyRequests
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeInsufficientStorage:
		return http.StatusInsufficientStorage
	}
	return http.StatusInternalServerError
}

// toError maps err to the response the client sees; internal reports
// whether it is of no kind (and must be logged): its text stays in the log,
// the client reads "internal error".
func toError(err error) (e *Error, internal bool) {
	e = ErrorOf(err)
	if e.Code == CodeInternal {
		return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}, true
	}
	return e, false
}

// errField returns the JSON path named by a field error in err, if any.
func errField(err error) string {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	var ce *shard.ConflictError
	if errors.As(err, &ce) {
		return ce.Field
	}
	var sfe *shard.FieldError
	if errors.As(err, &sfe) {
		if sfe.Task < 0 {
			return sfe.Field
		}
		return fmt.Sprintf("tasks[%d].%s", sfe.Task, sfe.Field)
	}
	return ""
}

// codeOf is the inverse of the table, for clients reading a body
// without a code.
func codeOf(status int) string {
	switch status {
	case http.StatusBadRequest:
		return CodeInvalidArgument
	case http.StatusUnauthorized:
		return CodeUnauthenticated
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusMethodNotAllowed:
		return CodeMethodNotAllow
	case http.StatusConflict:
		return CodeConflict
	case http.StatusPreconditionFailed:
		return CodePreconditionFailed
	case http.StatusRequestEntityTooLarge:
		return CodePayloadTooLarge
	case http.StatusServiceUnavailable:
		return CodeUnavailable
	case http.StatusInsufficientStorage:
		return CodeInsufficientStorage
	}
	return CodeInternal
}
