package shard

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCutError(t *testing.T) {
	if got := CutError("boom"); got != "boom" {
		t.Errorf("short = %q", got)
	}
	exact := strings.Repeat("x", MaxErrorBytes)
	if got := CutError(exact); got != exact {
		t.Errorf("MaxErrorBytes long was cut to %d bytes", len(got))
	}
	for _, fill := range []string{"x", "é", "日本", "🙂"} {
		s := "HEAD:" + strings.Repeat(fill, 3*MaxErrorBytes) + ":TAIL"
		got := CutError(s)
		if len(got) > MaxErrorBytes || len(got) < MaxErrorBytes-128 || !utf8.ValidString(got) ||
			!strings.HasPrefix(got, "HEAD:"+fill) || !strings.HasSuffix(got, fill+":TAIL") || !strings.Contains(got, " bytes cut ...] ") {
			t.Errorf("fill %q: %d bytes, valid %v: %.40q ... %.40q", fill, len(got), utf8.ValidString(got), got, got[len(got)-40:])
		}
		// What was cut plus what was kept is the whole.
		var cut int
		i := strings.Index(got, " [... ")
		if _, err := fmt.Sscanf(got[i:], " [... %d bytes cut", &cut); err != nil {
			t.Fatalf("fill %q: no note: %v", fill, err)
		}
		if note := fmt.Sprintf(" [... %d bytes cut ...] ", cut); len(got)-len(note)+cut != len(s) {
			t.Errorf("fill %q: kept %d and cut %d of %d bytes", fill, len(got)-len(note), cut, len(s))
		}
	}
}

func TestOutcomeBound(t *testing.T) {
	o := Outcome{OK: true, Result: []byte(`"` + strings.Repeat("r", MaxResultBytes) + `"`)}
	o.Bound()
	if o.OK || !o.Permanent || o.Result != nil || !strings.Contains(o.Error, "over the mesh's limit") {
		t.Errorf("oversized result: %+v; want a permanent failure", o)
	}
	o = Outcome{OK: true, Result: []byte(`1`)}
	if o.Bound(); !o.OK || string(o.Result) != "1" || o.Error != "" {
		t.Errorf("small result changed: %+v", o)
	}
	o = Outcome{Error: strings.Repeat("e", MaxErrorBytes+1), Permanent: true}
	if o.Bound(); len(o.Error) > MaxErrorBytes || !o.Permanent {
		t.Errorf("long error: %d bytes, permanent %v", len(o.Error), o.Permanent)
	}
}
