package client

import "github.com/needle-mesh/needle/peer/api"

// Client calls the HTTP API of one peer: SubmitTask, SubmitGroup, GetTask,
// WaitTask, WaitGroup, CancelTask, CancelGroup, ListTasks, ListGroups,
// RetryTask, RetryGroup, TaskLogs, FollowLogs, ... (see peer/api.Client).
// Any peer of a mesh answers for every task. Set Token to the API token
// when the peer requires one (New and FromEnv read NEEDLE_API_TOKEN or
// NEEDLE_API_TOKEN_FILE).
type Client = api.Client

// The API's request and answer types, for callers of Client.
type (
	SubmitTaskRequest   = api.SubmitTaskRequest
	SubmitTaskResponse  = api.SubmitTaskResponse
	SubmitGroupRequest  = api.SubmitGroupRequest
	SubmitGroupResponse = api.SubmitGroupResponse
	GroupTask           = api.GroupTask
	TaskFields          = api.TaskFields
	RetryPolicy         = api.RetryPolicy
	TaskView            = api.Task // a task as GET /v1/tasks/{id} shows it
	Group               = api.Group
	Error               = api.Error // a non-2xx answer
)

// ErrLogCut is FollowLogs' error for a log stream cut before its end
// (the peer stopped), the log read again without fault.
var ErrLogCut = api.ErrLogCut

// Terminal reports whether a task or group state is final.
func Terminal(state string) bool { return api.Terminal(state) }

// New returns a client of the peer at baseURL (e.g. "http://127.0.0.1:7070")
// with the API token of the environment, if set: NEEDLE_API_TOKEN, else
// the contents of the file NEEDLE_API_TOKEN_FILE names (TokenFromEnv). A
// token that cannot be read (both set, a file missing, empty or of more
// than one line) leaves Token empty, and the peer answers 401: call
// TokenFromEnv, or FromEnv, to learn why.
func New(baseURL string) *Client {
	token, _ := TokenFromEnv()
	return &Client{BaseURL: baseURL, Token: token}
}
