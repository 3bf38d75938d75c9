package api

import (
	"crypto/subtle"
	"strings"
	"sync/atomic"
)

// Tokens is the set of bearer tokens an API accepts: any one of them
// authenticates a request. It is a set, not one token, so that a token
// can be rotated without an outage: add the new one, move the clients to
// it, then remove the old one. Set replaces the set while requests are
// served (needled does on SIGHUP). The zero value accepts nothing.
type Tokens struct {
	set atomic.Pointer[[]string]
}

// NewTokens returns the set of tokens; empty ones are dropped.
func NewTokens(tokens ...string) *Tokens {
	t := &Tokens{}
	t.Set(tokens)
	return t
}

// Set replaces the tokens accepted; empty ones are dropped (an empty
// token would let "Bearer " through).
func (t *Tokens) Set(tokens []string) {
	kept := make([]string, 0, len(tokens))
	for _, tok := range tokens {
		if tok != "" {
			kept = append(kept, tok)
		}
	}
	t.set.Store(&kept)
}

// Len returns the number of tokens accepted.
func (t *Tokens) Len() int {
	if s := t.set.Load(); s != nil {
		return len(*s)
	}
	return 0
}

// BearerOK reports whether an Authorization header carries one of the
// tokens as "Bearer <token>" (the scheme in any case, as BearerOK). Every
// token is compared, each in constant time, whether or not an earlier one
// matched: the time taken tells nothing of which one did.
func (t *Tokens) BearerOK(header string) bool {
	got, ok := bearer(header)
	s := t.set.Load()
	if !ok || s == nil {
		return false
	}
	match := 0
	for _, tok := range *s {
		match |= subtle.ConstantTimeCompare([]byte(got), []byte(tok))
	}
	return match == 1
}

// bearer returns the token of an Authorization header "Bearer <token>".
func bearer(header string) (string, bool) {
	scheme, got, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(got, " "), true
}
