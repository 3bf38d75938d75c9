package api

import (
	"errors"
	"slices"
	"testing"
	"time"
)

var pollSeeds = []string{
	`{"worker": "w", "handlers": ["resize", "email"], "max": 8, "wait": "30s", "labels": ["zone=a"]}`,
	`{"worker": "w", "handlers": ["a"]}`,
	`{"worker": "w"}`,
	`{"worker": "w", "handlers": []}`,
	`{"worker": "w", "handlers": [""]}`,
	`{"worker": "w", "handlers": ["a b"]}`,
	`{"worker": "w", "handlers": ["a"], "max": 1001}`,
	`{"worker": "w", "handlers": ["a"], "max": 0}`,
	`{"worker": "w", "handlers": ["a"], "wait": "6m"}`,
	`{"worker": "w", "handlers": ["a"], "wait": "-1s"}`,
	`{"worker": "w", "handlers": ["a"], "wait": "soon"}`,
	`{"worker": "w", "handlers": ["a"], "labels": ["zone"]}`,
	`{"worker": "w", "handlers": ["a"], "extra": 1}`,
	`{"worker": "w\u0000", "handlers": ["a"]}`,
	`[1, 2]`, `{`, ``, `null`,
}

// FuzzDecodePoll: a poll body decodes to a request within its bounds, or
// to a *FieldError; never a panic.
func FuzzDecodePoll(f *testing.F) {
	for _, s := range pollSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodePoll(body)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("DecodePoll error %T %v; want a *FieldError", err, err)
			}
			return
		}
		switch {
		case req.Worker == "" || len(req.Worker) > maxWorkerIDLen:
			t.Fatalf("worker %q accepted", req.Worker)
		case len(req.Handlers) == 0 || len(req.Handlers) > maxHandlers:
			t.Fatalf("%d handlers accepted", len(req.Handlers))
		case req.Max < 1 || req.Max > MaxPollTasks:
			t.Fatalf("max %d accepted", req.Max)
		case req.Wait < 0 || req.Wait > MaxPollWait:
			t.Fatalf("wait %v accepted", req.Wait)
		case slices.ContainsFunc(req.Handlers, func(h string) bool { return ValidHandlerName(h) != nil }):
			t.Fatalf("handlers %q accepted", req.Handlers)
		}
	})
}

// FuzzDecodeLeaseBodies: the bodies of complete, fail and logs, and lease
// tokens, decode or fail with a *FieldError; never a panic.
func FuzzDecodeLeaseBodies(f *testing.F) {
	for _, s := range []string{
		`{"result": {"url": "x"}}`, `{"result": null}`, `{}`, ``, `{"resul": 1}`, `{"result": 1} 2`,
		`{"error": "boom", "permanent": true}`, `{"error": ""}`, `{"error": 3}`,
		`{"lines": ["a", "b"]}`, `{"lines": "a"}`, `{"lines": [1]}`,
		`00112233445566778899aabbccddeeff`, `not-a-lease`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(what string, err error) {
			var fe *FieldError
			if err != nil && !errors.As(err, &fe) {
				t.Fatalf("%s error %T %v; want a *FieldError", what, err, err)
			}
		}
		var c CompleteRequest
		check("DecodeComplete", DecodeComplete(body, &c))
		var fr FailRequest
		if err := DecodeFail(body, &fr); err == nil && fr.Error == "" {
			t.Fatal("a fail without error accepted")
		} else {
			check("DecodeFail", err)
		}
		var l LogsRequest
		if err := DecodeLogs(body, &l); err == nil && len(l.Lines) > maxLogLines {
			t.Fatalf("%d lines accepted", len(l.Lines))
		} else {
			check("DecodeLogs", err)
		}
		check("ValidLease", ValidLease(string(body)))
	})
}

func TestDecodePoll(t *testing.T) {
	req, err := DecodePoll([]byte(pollSeeds[0]))
	if err != nil || req.Worker != "w" || !slices.Equal(req.Handlers, []string{"resize", "email"}) || req.Max != 8 ||
		req.Wait != 30*time.Second || !slices.Equal(req.Labels, []string{"zone=a"}) {
		t.Fatalf("DecodePoll = %+v, %v", req, err)
	}
	if req, err := DecodePoll([]byte(pollSeeds[1])); err != nil || req.Max != 1 || req.Wait != 0 {
		t.Fatalf("defaults: DecodePoll = %+v, %v; want max 1, wait 0", req, err)
	}
}
