// Package web links net/http.
package web

import "net/http"

// Get fetches url.
func Get(url string) (*http.Response, error) { return http.Get(url) }
