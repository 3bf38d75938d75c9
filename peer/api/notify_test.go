package api

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeNotify(t *testing.T) {
	allow := Limits{Notify: func(u string) error {
		if strings.HasPrefix(u, "https://hooks.example/") {
			return nil
		}
		return errors.New("not under an allowed prefix")
	}}
	for _, tt := range []struct {
		name, body string
		lim        Limits
		task       bool
		want       string // notify URL, or the error's text
		ok         bool
	}{
		{"task", `{"handler":"echo","notify":"https://hooks.example/a"}`, allow, true, "https://hooks.example/a", true},
		{"group", `{"mode":"parallel","notify":"https://hooks.example/b","tasks":[{"handler":"echo"}]}`, allow, false, "https://hooks.example/b", true},
		{"pipeline", `{"mode":"pipeline","notify":"https://hooks.example/c","stages":[{"name":"s","handler":"echo"}],"items":[1,2]}`, allow, false, "https://hooks.example/c", true},
		{"off the list", `{"handler":"echo","notify":"https://evil.example/"}`, allow, true, "not under an allowed prefix", false},
		{"no allow-list", `{"handler":"echo","notify":"https://hooks.example/a"}`, Limits{}, true, "no notify allow-list", false},
		{"too long", `{"handler":"echo","notify":"https://hooks.example/` + strings.Repeat("a", 3000) + `"}`, allow, true, "longer than", false},
		{"none", `{"handler":"echo"}`, Limits{}, true, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			var got string
			if tt.task {
				spec, e := DecodeTask(strings.NewReader(tt.body), tt.lim)
				if err = e; spec != nil {
					got = spec.Notify
				}
			} else {
				spec, e := DecodeGroup(strings.NewReader(tt.body), tt.lim)
				if err = e; spec != nil {
					got = spec.Notify
				}
			}
			if tt.ok {
				if err != nil || got != tt.want {
					t.Fatalf("notify = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != "notify" || !strings.Contains(fe.Message, tt.want) {
				t.Fatalf("err = %v; want a FieldError on notify containing %q", err, tt.want)
			}
		})
	}
}
