package client

// pollBody is the body of POST /v1/workers/poll (api.PollRequest as it is
// sent: the wait as a duration string).
type pollBody struct {
	Worker   string   `json:"worker"`
	Instance string   `json:"instance"`
	Handlers []string `json:"handlers"`
	Max      int      `json:"max"`
	// Slots states the worker's capacity (Concurrency), which GET
	// /v1/workers shows; 0 leaves it out (a peer of an older release
	// refuses it).
	Slots  int      `json:"slots,omitempty"`
	Wait   string   `json:"wait"`
	Labels []string `json:"labels,omitempty"`
	// Done carries outcomes of finished leases (docs/api.md); this
	// worker sends them with POST /v1/leases/report instead.
	Done []doneEntry `json:"done,omitempty"`
}
