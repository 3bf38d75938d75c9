package peer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/needle-mesh/needle/peer"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/peer/handler"
)

// Example embeds a peer in a Go program, registers a handler and runs a
// task through the HTTP API.
func Example() {
	p, err := peer.New(peer.Config{
		DataDir: "", InMemory: true, // a real program sets DataDir instead
		HTTPAddr: "127.0.0.1:0", Slots: 2, Listen: []string{"/ip4/127.0.0.1/tcp/0"},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	// Handlers receive the payload (JSON) and return a JSON result.
	p.Handlers().Register("upper", func(ctx context.Context, c handler.Call) ([]byte, error) {
		var s string
		if err := json.Unmarshal(c.Payload, &s); err != nil {
			return nil, handler.Permanent(err) // bad input: do not retry
		}
		return json.Marshal(strings.ToUpper(s))
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	<-p.Ready()

	c := &api.Client{BaseURL: "http://" + p.Addr()}
	res, err := c.SubmitTask(ctx, &api.SubmitTaskRequest{TaskFields: api.TaskFields{Handler: "upper", Payload: json.RawMessage(`"hello"`)}})
	if err != nil {
		panic(err)
	}
	t, err := c.GetTask(ctx, res.ID, 10e9)
	if err != nil {
		panic(err)
	}
	fmt.Println(t.State, string(t.Result))
	cancel()
	<-done
	// Output: SUCCEEDED "HELLO"
}
