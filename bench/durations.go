package bench

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// w3Durations is the W3 list of docs/design.md (testdata/w3-durations-ms.txt): the
// 300 task durations (ms) the peer systems were measured with.
//
//go:embed testdata/w3-durations-ms.txt
var w3Durations []byte

// loadDurations returns the W3 durations in ms: from path when set, else
// the embedded list.
func loadDurations(path string) ([]int, error) {
	data := w3Durations
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("bench: --w3-file: %w", err)
		}
		data = b
	}
	ds, err := parseDurations(data)
	if err != nil {
		return nil, fmt.Errorf("bench: w3 durations %q: %w", path, err)
	}
	return ds, nil
}

// parseDurations reads one positive integer (ms) per line; blank lines and
// lines starting with # are skipped.
func parseDurations(data []byte) ([]int, error) {
	var ds []int
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		d, err := strconv.Atoi(line)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("line %d: %q is not a positive number of ms", n, line)
		}
		ds = append(ds, d)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, fmt.Errorf("no durations")
	}
	return ds, nil
}
