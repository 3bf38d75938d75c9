package api

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkDecodeGroup decodes a W1 group (1,000 echo tasks of a parallel
// group), parsed in one pass and task by task.
func BenchmarkDecodeGroup(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"mode": "parallel", "tasks": [`)
	for i := range 1000 {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, `{"handler": "echo", "payload": {"i": %d}, "timeout": "30s"}`, i)
	}
	sb.WriteString(`]}`)
	body := []byte(sb.String())
	lim := testLimits()
	lim.MaxBody, lim.MaxTasks = 1<<20, 1000
	lim = lim.withDefaults()
	for _, onePass := range []bool{true, false} {
		b.Run(fmt.Sprintf("onePass=%v", onePass), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, _, err := decodeGroupData(body, lim, onePass); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
