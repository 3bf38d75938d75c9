// Package api is the HTTP edge of a needle peer: the JSON wire types of the
// v1 API (docs/api.md, docs/openapi.yaml), the decoding and validation of submissions, the
// http.Handler that serves the routes, and a Go client for them.
//
// The package owns nothing but translation. It turns request bodies into
// shard.GroupSpec values and shard views into response bodies; everything
// else is asked of a Backend, which the peer runtime implements (and tests
// fake).
//
// Guarantees:
//
//  1. Input is checked once, here, and never panics: a body is read through a
//     size limit, decoded with unknown fields rejected, and validated before
//     any Backend method is called. A rejected request never reaches the
//     Backend, so it creates nothing.
//  2. Every field error names the JSON path of the offending value exactly as
//     the client wrote it: "tasks[3].deps", "stages[1][0].timeout",
//     "retry.max_attempts".
//  3. Error kinds map to HTTP status codes in one table (errorStatus); only
//     internal errors are logged.
//
// Defaults applied by the decoder (documented in docs/api.md):
//
//   - retry.max_attempts: 1 (no retry); when given it must be 1..MaxAttempts.
//   - retry.backoff: 1s; retry.max_backoff: max(backoff, 2m). An explicit
//     max_backoff below the backoff is an error.
//   - timeout 0 (or absent): the peer's default timeout.
//   - payload absent or null: the bytes "null". Payloads are stored compacted.
//   - mode absent: "pipeline" when "stages" is given, else "dag".
//   - names: required in dag mode; in parallel mode an unnamed task i is
//     called "t<i>"; in pipeline mode an unnamed task j of stage i is called
//     "s<i>-<j>". Names are unique within a group.
package api
