package client

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
)

// DefaultURL is the peer FromEnv calls when the environment names none.
const DefaultURL = "http://127.0.0.1:7070"

// maxTokenFile is the largest token file read, in bytes (as the CLI): a
// token is short, and a path naming a large file by mistake is refused
// rather than read whole.
const maxTokenFile = 4096

// FromEnv returns a client of the peer the environment names, with its
// token, read as the CLI and the Python client read them: the URL from
// NEEDLE_URL, else NEEDLE_ADDR (the CLI's; "host:port" is taken as
// http://host:port), else DefaultURL; the token as TokenFromEnv reads it.
// A URL that is not http(s)://host[:port] is an error naming its
// variable, as is a token that cannot be read.
func FromEnv() (*Client, error) {
	token, err := TokenFromEnv()
	if err != nil {
		return nil, err
	}
	base, name := DefaultURL, ""
	for _, v := range []string{"NEEDLE_URL", "NEEDLE_ADDR"} {
		if s := os.Getenv(v); s != "" {
			base, name = s, v
			break
		}
	}
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: %s: want http(s)://host:port, got %q", name, os.Getenv(name))
	}
	return &Client{BaseURL: strings.TrimRight(base, "/"), Token: token}, nil
}

// TokenFromEnv returns the API token of the environment: NEEDLE_API_TOKEN,
// else the contents of the file NEEDLE_API_TOKEN_FILE names (a mounted
// secret) with the white space around it removed; "" when neither is
// set. Both set is an error (which one wins would be a guess), as is a
// file that cannot be read, is empty, is over 4 KiB, or holds more than
// one line or a line of a peer's token file (name=, scope=): sent as it
// is, it would be a 401 that says nothing of why.
func TokenFromEnv() (string, error) {
	v, path := os.Getenv("NEEDLE_API_TOKEN"), os.Getenv("NEEDLE_API_TOKEN_FILE")
	switch {
	case path == "":
		return v, nil
	case v != "":
		return "", errors.New("client: NEEDLE_API_TOKEN and NEEDLE_API_TOKEN_FILE are both set: set one")
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("client: NEEDLE_API_TOKEN_FILE: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("client: NEEDLE_API_TOKEN_FILE: read %s: %w", path, err)
	}
	token := strings.TrimSpace(string(raw))
	switch fields := strings.Fields(token); {
	case len(raw) > maxTokenFile:
		return "", fmt.Errorf("client: NEEDLE_API_TOKEN_FILE: %s is larger than %d bytes", path, maxTokenFile)
	case token == "":
		return "", fmt.Errorf("client: NEEDLE_API_TOKEN_FILE: %s is empty", path)
	case strings.ContainsAny(token, "\r\n"):
		return "", fmt.Errorf("client: NEEDLE_API_TOKEN_FILE: %s holds more than one line: a client's file holds the token alone", path)
	case len(fields) > 1 && slices.ContainsFunc(fields[1:], func(f string) bool {
		return strings.HasPrefix(f, "name=") || strings.HasPrefix(f, "scope=")
	}):
		return "", fmt.Errorf("client: NEEDLE_API_TOKEN_FILE: %s holds a line of a peer's token file (name=, scope=): a client's file holds the token alone", path)
	}
	return token, nil
}
