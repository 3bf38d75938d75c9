package api

import "testing"

// A handler given several tokens accepts each of them and nothing else;
// a token removed from the set (the end of a rotation) is refused at
// once, and one added accepted, with no new handler.
func TestTokensAuth(t *testing.T) {
	tokens := NewTokens("old-token", "new-token", "")
	h := newTestHandler(&fakeBackend{}, HandlerOptions{Tokens: tokens})
	status := func(token string) int {
		t.Helper()
		return call(t, h, "POST", "/v1/tasks", `{"handler": "echo"}`, "Authorization", "Bearer "+token).status
	}
	for _, tok := range []string{"old-token", "new-token"} {
		if got := status(tok); got != 201 {
			t.Errorf("submit with %q = %d; want 201", tok, got)
		}
	}
	// The empty token given is dropped, not accepted as "Bearer ".
	for _, tok := range []string{"", "other", "old-token\nnew-token", "old-tokennew-token", "new"} {
		if got := status(tok); got != 401 {
			t.Errorf("submit with %q = %d; want 401", tok, got)
		}
	}
	tokens.Set([]string{"new-token", "newer-token"})
	for tok, want := range map[string]int{"old-token": 401, "new-token": 201, "newer-token": 201} {
		if got := status(tok); got != want {
			t.Errorf("after Set: submit with %q = %d; want %d", tok, got, want)
		}
	}
	if n := tokens.Len(); n != 2 {
		t.Errorf("Len = %d; want 2", n)
	}
}

// The zero Tokens, and one emptied, accept nothing.
func TestTokensEmptyAcceptNothing(t *testing.T) {
	for _, tokens := range []*Tokens{{}, NewTokens(), NewTokens("")} {
		for _, hdr := range []string{"", "Bearer", "Bearer ", "Bearer x"} {
			if tokens.BearerOK(hdr) {
				t.Errorf("%d tokens accept %q", tokens.Len(), hdr)
			}
		}
	}
}
