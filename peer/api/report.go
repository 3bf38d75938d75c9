package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"
)

// Batched outcomes: a worker reports the outcomes of many leases in one
// request, either on its next poll ("done" in the poll's body) or with
// POST /v1/leases/report. Each entry is fenced exactly as the per-lease
// complete and fail are, and answered on its own (see LeaseVerdict).

// MaxReport bounds the entries of one batch ("done").
const MaxReport = 1000

// LeaseOutcome is one entry of a batch: the outcome of a lease. Failed
// says it is a fail (Error, Permanent); Released a release (Error is its
// reason); else a complete (Result, null when absent). Its JSON is the
// mesh's, for a batch forwarded to the peer that holds its leases.
type LeaseOutcome struct {
	Lease     string          `json:"lease"`
	Result    json.RawMessage `json:"result,omitempty"`
	Failed    bool            `json:"failed,omitempty"`
	Released  bool            `json:"released,omitempty"`
	Error     string          `json:"error,omitempty"`
	Permanent bool            `json:"permanent,omitempty"`
}

// doneBody is a LeaseOutcome on the wire. A null result or error is the
// same as none (a worker in a typed language writes every field).
type doneBody struct {
	Lease     string          `json:"lease"`
	Result    json.RawMessage `json:"result"`
	Error     *string         `json:"error"`
	Permanent bool            `json:"permanent"`
	Release   bool            `json:"release"`
	Reason    *string         `json:"reason"`
}

// LeaseVerdict answers one entry of a batch, in the batch's order: Status
// is what the per-lease call would have answered (200 taken, or a repeat
// of the outcome already taken; 409 lease_lost; 404 unknown lease; 400 a
// result over --max-result, the task failed permanently), Error its error
// when not 200.
type LeaseVerdict struct {
	Lease  string `json:"lease"`
	Status int    `json:"status"`
	Error  *Error `json:"error,omitempty"`
}

// ReportResult is the body of the answer to POST /v1/leases/report.
type ReportResult struct {
	Done []LeaseVerdict `json:"done"`
}

// Reporter is what a Workers backend implements to take batches: Report
// applies each outcome as Complete or Fail would, and returns one error
// per entry (nil: taken, or a repeat).
type Reporter interface {
	Report(ctx context.Context, done []LeaseOutcome) []error
}

// DecodeDone decodes and checks a batch of outcomes (the "done" field of
// a poll or a report, a JSON array); field is its name, for errors
// ("done[3].lease"). A lease may appear once in a batch.
func DecodeDone(data json.RawMessage, field string) ([]LeaseOutcome, error) {
	var bs []doneBody
	if err := decodeStrict(data, &bs, field); err != nil {
		// Decode entry by entry to name the one at fault.
		var raw []json.RawMessage
		if rerr := decodeStrict(data, &raw, field); rerr != nil {
			return nil, rerr
		}
		if len(raw) > MaxReport {
			return nil, fieldErr(field, "more than %d outcomes in one batch", MaxReport)
		}
		for i, r := range raw {
			var b doneBody
			if err := decodeStrict(r, &b, fmt.Sprintf("%s[%d]", field, i)); err != nil {
				return nil, err
			}
		}
		return nil, err
	}
	if bs == nil {
		return nil, fieldErr(field, "want a list of outcomes, got null")
	}
	if len(bs) > MaxReport {
		return nil, fieldErr(field, "more than %d outcomes in one batch", MaxReport)
	}
	out := make([]LeaseOutcome, 0, len(bs))
	seen := make(map[string]bool, len(bs))
	for i := range bs {
		o, err := checkDone(&bs[i], fmt.Sprintf("%s[%d]", field, i), seen)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// checkDone checks one decoded entry of a batch at path.
func checkDone(b *doneBody, path string, seen map[string]bool) (LeaseOutcome, error) {
	if err := ValidLease(b.Lease); err != nil {
		return LeaseOutcome{}, fieldErr(path+".lease", "malformed lease token")
	}
	if seen[b.Lease] {
		return LeaseOutcome{}, fieldErr(path+".lease", "lease %s is already in this batch", b.Lease)
	}
	seen[b.Lease] = true
	o := LeaseOutcome{Lease: b.Lease, Result: b.Result, Permanent: b.Permanent}
	hasResult := b.Result != nil && string(bytes.TrimSpace(b.Result)) != "null"
	if hasResult && !utf8.Valid(b.Result) {
		return o, notUTF8(path + ".result")
	}
	switch {
	case b.Release && (hasResult || b.Error != nil || b.Permanent):
		return o, fieldErr(path, "a release hands the task back unrun: no result, error or permanent")
	case b.Release:
		o.Released, o.Result = true, nil
		if b.Reason != nil {
			o.Error = *b.Reason
		}
		return o, checkReason(o.Error, path+".reason")
	case b.Reason != nil:
		return o, fieldErr(path+".reason", "only a release (\"release\": true) has a reason")
	case b.Error != nil && hasResult:
		return o, fieldErr(path, "either result (complete) or error (fail), not both")
	case b.Error != nil && *b.Error == "":
		return o, fieldErr(path+".error", "empty: say why the attempt failed")
	case b.Error != nil:
		o.Failed, o.Error, o.Result = true, *b.Error, nil
	case b.Permanent:
		return o, fieldErr(path+".permanent", "only a failure (error) is permanent")
	}
	return o, nil
}

// verdicts turns a backend's per-entry errors into the answer's entries;
// a field an error names is within its entry (done[3].result).
func (s *server) verdicts(r *http.Request, field string, done []LeaseOutcome, errs []error) []LeaseVerdict {
	out := make([]LeaseVerdict, len(done))
	for i, o := range done {
		out[i] = LeaseVerdict{Lease: o.Lease, Status: http.StatusOK}
		if i >= len(errs) || errs[i] == nil {
			continue
		}
		e, internal := toError(errs[i])
		if internal {
			s.log.Error("api lease report failed", "method", r.Method, "path", r.URL.Path, "lease", o.Lease, "err", errs[i])
		}
		if e.Field != "" {
			e = &Error{Status: e.Status, Code: e.Code, Message: e.Message, Field: fmt.Sprintf("%s[%d].%s", field, i, e.Field)}
		}
		out[i].Status, out[i].Error = e.Status, e
	}
	return out
}

// report serves POST /v1/leases/report: {"done": [...]}.
func (s *server) report(w http.ResponseWriter, r *http.Request, rp Reporter) {
	body, err := readBody(http.MaxBytesReader(w, r.Body, s.opts.Limits.withDefaults().MaxBody), s.opts.Limits.withDefaults().MaxBody)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var b struct {
		Done json.RawMessage `json:"done"`
	}
	if err := decodeStrict(body, &b, ""); err != nil {
		s.fail(w, r, err)
		return
	}
	if b.Done == nil || string(b.Done) == "null" {
		s.fail(w, r, fieldErr("done", "required: the outcomes to report"))
		return
	}
	done, err := DecodeDone(b.Done, "done")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ReportResult{Done: s.verdicts(r, "done", done, rp.Report(r.Context(), done))})
}
