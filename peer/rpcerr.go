package peer

import (
	"fmt"
	"strings"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// rpcError is the error of a forwarded request's answer, in the API's
// vocabulary (api.ErrorOf): its code, message and field cross the mesh, and
// the forwarding peer returns an *api.Error of the same kind, so an owner's
// 409 is the client's 409 and a field error names the same field.
//
// Err and Field are the previous release's encoding, still written and
// read: Err a coarse kind (legacyKind), Field the field at fault as a
// shard.FieldError. A peer of that release reads them and ignores Code; an
// answer from it has no Code and its kind is mapped (legacyCode).
type rpcError struct {
	Err   string            `json:"err,omitempty"`   // previous release's kind: not_found, unavailable, invalid, conflict, internal
	Code  string            `json:"code,omitempty"`  // api code: invalid_argument, not_found, conflict, lease_lost, ...
	Msg   string            `json:"msg,omitempty"`   // the error's text (api.Error.Message)
	Field *shard.FieldError `json:"field,omitempty"` // the field at fault; Task -1 and Field the JSON path, from this release
}

// set records err (nil: nothing) in the vocabulary.
func (e *rpcError) set(err error) {
	if err == nil {
		return
	}
	ae := api.ErrorOf(mapErr(err))
	e.Code, e.Msg, e.Err = ae.Code, ae.Message, legacyKind(ae.Code)
	if ae.Field != "" || e.Err == "invalid" {
		// The previous release answers "invalid" only with a field.
		e.Field = &shard.FieldError{Task: -1, Field: ae.Field, Message: strings.TrimPrefix(ae.Message, ae.Field+": ")}
	}
}

// err returns the recorded error as an *api.Error, or nil.
func (e *rpcError) err() error {
	code := e.Code
	if code == "" {
		if e.Err == "" {
			return nil
		}
		code = legacyCode(e.Err)
	}
	var field string
	if f := e.Field; f != nil {
		field = f.Field
		if f.Task >= 0 {
			field = fmt.Sprintf("tasks[%d].%s", f.Task, f.Field)
		}
	}
	return api.NewError(code, field, e.Msg)
}

// legacyKind is the previous release's kind of an api code.
func legacyKind(code string) string {
	switch code {
	case api.CodeNotFound, api.CodeUnavailable, api.CodeConflict:
		return code
	case api.CodeLeaseLost:
		return "conflict"
	case api.CodeInvalidArgument, api.CodePayloadTooLarge:
		return "invalid"
	}
	return "internal"
}

// legacyCode maps a kind of the previous release to its api code.
func legacyCode(kind string) string {
	switch kind {
	case "not_found":
		return api.CodeNotFound
	case "unavailable":
		return api.CodeUnavailable
	case "invalid":
		return api.CodeInvalidArgument
	case "conflict":
		return api.CodeConflict
	}
	return api.CodeInternal
}
