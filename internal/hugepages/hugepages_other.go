//go:build !linux

package hugepages

// Enable does nothing where there is no Linux: the Result says so.
func Enable(reserve int64) Result {
	return Result{Why: "not Linux"}
}
