// Package chain links net/http through web.
package chain

import "github.com/needle-mesh/needle/internal/deptest/testdata/src/web"

// Fetch fetches url.
var Fetch = web.Get
