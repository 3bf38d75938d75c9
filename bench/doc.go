// Package bench runs needle's real-process benchmarks: it starts N needled
// processes on loopback, drives the workloads W1-W4 of docs/design.md through
// the HTTP API of docs/api.md, checks every result, and reports the median and
// the min-max over repetitions as a table and as JSON.
//
// The harness is black-box: it only knows the needled flags and the HTTP
// API, so it measures what a user sees. It does not import the peer code.
//
// Driving it:
//
//  1. Build a Config (start from DefaultConfig) and call Run with a context
//     that is canceled on Ctrl-C (signal.NotifyContext).
//  2. Run starts a fresh Cluster for every workload repetition and closes it
//     afterwards, so no repetition sees another's state. Closing sends
//     SIGTERM to each peer's process group, then SIGKILL after 5 s.
//  3. Run prints the table to Config.Out and the JSON report to Config.JSON,
//     also when a check failed; a wrong result or a lost task makes Run
//     return an error (a *CheckError) after printing.
//
// Config.Start replaces the process launcher; tests use it to run in-process
// fake peers.
package bench
