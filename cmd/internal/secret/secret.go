// Package secret reads the secrets the needle binaries take from files
// (NEEDLE_API_TOKEN_FILE), the way container secrets are mounted: a compose
// secret or a Kubernetes Secret is a file holding the value, often with a
// trailing newline.
package secret

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// MaxSize is the largest secret file read, in bytes: a token is short, and
// a path naming a large file by mistake is refused rather than read whole.
const MaxSize = 4096

// ErrEmpty is wrapped by ReadFile for a file that holds only whitespace,
// and by ReadList for one that holds no secret line.
var ErrEmpty = errors.New("file is empty")

// ErrLines is wrapped by ReadFile for a file of more than one line.
var ErrLines = errors.New("holds more than one line")

// ReadFile returns the secret in the file at path with the white space
// around it removed. It refuses an empty file, a file larger than MaxSize
// and a value of more than one line.
func ReadFile(path string) (string, error) {
	raw, err := read(path)
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(raw)
	switch {
	case v == "":
		return "", fmt.Errorf("%s: %w", path, ErrEmpty)
	case strings.ContainsAny(v, "\r\n"):
		return "", fmt.Errorf("%s: %w", path, ErrLines)
	}
	return v, nil
}

// ReadList returns the secrets in the file at path, one a line, each with
// the white space around it removed; blank lines and lines starting with
// "#" are skipped (so a secret cannot start with "#"). A file of several
// is how a peer accepts an old and a new API token during a rotation. It
// refuses a file larger than MaxSize and one holding no secret (ErrEmpty).
func ReadList(path string) ([]string, error) {
	raw, err := read(path)
	if err != nil {
		return nil, err
	}
	var list []string
	for _, line := range strings.Split(raw, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			list = append(list, line)
		}
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%s: %w", path, ErrEmpty)
	}
	return list, nil
}

// ReadText returns the content of the file at path as it is, for a caller
// that parses it (needled's token file, whose errors name lines). It
// refuses a file larger than MaxSize.
func ReadText(path string) (string, error) { return read(path) }

// read returns the content of the file at path, of at most MaxSize bytes.
func read(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err // "open PATH: no such file or directory"
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if len(raw) > MaxSize {
		return "", fmt.Errorf("%s: larger than %d bytes", path, MaxSize)
	}
	return string(raw), nil
}

// FromEnv returns the secret named by the variable name, read from the
// environment directly or, when name is unset, from the file that
// name+"_FILE" names. Setting both is an error: which one wins would be a
// guess.
func FromEnv(name string, getenv func(string) string) (string, error) {
	v, file := getenv(name), getenv(name+"_FILE")
	switch {
	case file == "":
		return v, nil
	case v != "":
		return "", fmt.Errorf("%s and %s_FILE are both set: set one", name, name)
	}
	v, err := ReadFile(file)
	if errors.Is(err, ErrLines) {
		// A peer's --api-token-file (several tokens, with name= and
		// scope=) named by a client: it said only "holds more than one line".
		return "", fmt.Errorf("%s_FILE: %w: a client's file holds its one token alone, not a peer's --api-token-file", name, err)
	}
	if err != nil {
		return "", fmt.Errorf("%s_FILE: %w", name, err)
	}
	if f := strings.Fields(v); len(f) > 1 && slices.ContainsFunc(f[1:], isTokenKey) {
		// Sent as it is, it would be a 401 that says nothing of why.
		return "", fmt.Errorf("%s_FILE: %s holds a line of a peer's token file (name=, scope=): a client's file holds the token alone", name, file)
	}
	return v, nil
}

// isTokenKey reports whether a field of a line is a token file's name= or
// scope=.
func isTokenKey(f string) bool {
	return strings.HasPrefix(f, "name=") || strings.HasPrefix(f, "scope=")
}
