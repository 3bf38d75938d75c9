package api

import (
	"context"
	"time"
)

// Bounds of WaitTask and WaitGroup.
const (
	waitPoll   = DefaultMaxWait // ?wait= of one long poll (the server caps it)
	waitMinGap = time.Second    // pause when a poll returns early and not terminal
)

// Terminal reports whether a task or group state is final: SUCCEEDED,
// FAILED or CANCELED.
func Terminal(state string) bool {
	return state == "SUCCEEDED" || state == "FAILED" || state == "CANCELED"
}

// WaitTask long-polls until task id is terminal and returns it; it gives
// up when ctx ends.
func (c *Client) WaitTask(ctx context.Context, id string) (*Task, error) {
	for {
		start := time.Now()
		t, err := c.GetTask(ctx, id, waitPoll)
		if err != nil || Terminal(t.State) {
			return t, err
		}
		if err := pauseIfEarly(ctx, start); err != nil {
			return t, err
		}
	}
}

// WaitGroup long-polls until group id is terminal and returns it with its
// tasks; it gives up when ctx ends. The polls ask for the summary only, so
// a large group is sent once, at the end.
func (c *Client) WaitGroup(ctx context.Context, id string) (*Group, error) {
	for {
		start := time.Now()
		g, err := c.GroupSummary(ctx, id, waitPoll)
		if err != nil {
			return g, err
		}
		if Terminal(g.State) {
			return c.GetGroup(ctx, id, 0)
		}
		if err := pauseIfEarly(ctx, start); err != nil {
			return g, err
		}
	}
}

// pauseIfEarly waits until waitMinGap after start, so that a server that
// answers long polls at once is not asked in a tight loop.
func pauseIfEarly(ctx context.Context, start time.Time) error {
	d := waitMinGap - time.Since(start)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
