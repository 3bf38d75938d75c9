package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// readJSONFile reads the JSON document in file ("-" for stdin, when
// stdin is not nil) and checks
// its syntax here, so that a typo is named by line and column
// ("group.json:3:31: invalid character ...") rather than by the byte
// offset a peer's 400 gives. A file that cannot be read, as one that is
// not JSON, is a usage error (exit 2: the command line names input it
// cannot use, and nothing was sent), as --payload that is not JSON is.
func readJSONFile(file string, stdin io.Reader) ([]byte, error) {
	var data []byte
	var err error
	name := file
	if file == "-" && stdin != nil {
		name = "stdin"
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, &exitError{code: 2, err: err} // "open group.json: no such file or directory"
	}
	if err := jsonSyntax(data); err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("%s:%w", name, err)} // bad input, as a bad flag
	}
	return data, nil
}

// jsonSyntax returns nil when data is one JSON document, else its first
// syntax error as "LINE:COL: message" (1-based; an unexpected end is at
// the end of the input).
func jsonSyntax(data []byte) error {
	var v json.RawMessage
	var se *json.SyntaxError
	if err := json.Unmarshal(data, &v); !errors.As(err, &se) {
		return err // nil: one JSON document
	}
	off := min(se.Offset, int64(len(data)))
	if off > 0 && !strings.HasPrefix(se.Error(), "unexpected end") {
		off-- // the offset is past the byte that broke it
	}
	line := bytes.Count(data[:off], []byte("\n")) + 1
	col := int(off) - bytes.LastIndexByte(data[:off], '\n')
	return fmt.Errorf("%d:%d: %w", line, col, se)
}
