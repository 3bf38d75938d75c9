package peer

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestRateLimiter(t *testing.T) {
	rl := newRateLimiter(10) // burst 20
	now := time.Unix(0, 0)
	allowed := 0
	for range 50 {
		if rl.allow("10.0.0.1:5555", now) {
			allowed++
		}
	}
	if allowed != 20 {
		t.Errorf("burst allowed %d; want 20", allowed)
	}
	if !rl.allow("10.0.0.2:1", now) {
		t.Error("another client was limited")
	}
	if !rl.allow("10.0.0.1:6666", now.Add(time.Second)) {
		t.Error("the bucket did not refill after a second")
	}
}

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"127.0.0.1:7070", true},
		{"localhost:7070", true},
		{"[::1]:7070", true},
		{"0.0.0.0:7070", false},
		{":7070", false},
		{"10.1.2.3:80", false},
		{"[::]:80", false},
	}
	for _, tt := range tests {
		if got := isLoopback(tt.in); got != tt.want {
			t.Errorf("isLoopback(%q) = %v; want %v", tt.in, got, tt.want)
		}
	}
}

// TestOpenAPIRefused: a non-loopback --http without a token stops the peer
// with an error that says how to fix it, instead of binding elsewhere.
func TestOpenAPIRefused(t *testing.T) {
	for _, tt := range []struct {
		name    string
		c       Config
		wantErr bool
	}{
		{"loopback, no token", Config{HTTPAddr: "127.0.0.1:7070"}, false},
		{"all interfaces, no token", Config{HTTPAddr: "0.0.0.0:7070"}, true},
		{"no host, no token", Config{HTTPAddr: ":7070"}, true},
		{"all interfaces, token", Config{HTTPAddr: "0.0.0.0:7070", Token: "t"}, false},
		{"all interfaces, open on purpose", Config{HTTPAddr: "0.0.0.0:7070", OpenAPI: true}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			c.Logger = slog.New(slog.DiscardHandler)
			err := c.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v; want error %v", err, tt.wantErr)
			}
			if err != nil && (!strings.Contains(err.Error(), "NEEDLE_API_TOKEN") || !strings.Contains(err.Error(), "--insecure-open-api")) {
				t.Errorf("Validate() = %q; want it to name NEEDLE_API_TOKEN and --insecure-open-api", err)
			}
			if err == nil && c.HTTPAddr != tt.c.HTTPAddr {
				t.Errorf("HTTPAddr = %q; want %q unchanged", c.HTTPAddr, tt.c.HTTPAddr)
			}
		})
	}
}

// A token served in plain HTTP beyond this host is warned about: it
// travels in clear. Not on loopback, and not with --tls-cert.
func TestClearTokenWarned(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    Config
		warn bool
	}{
		{"token, all interfaces, plain", Config{HTTPAddr: "0.0.0.0:7070", Token: "t"}, true},
		{"token, loopback", Config{HTTPAddr: "127.0.0.1:7070", Token: "t"}, false},
		{"token, TLS", Config{HTTPAddr: "0.0.0.0:7070", Token: "t", TLSCert: "c.pem", TLSKey: "k.pem"}, false},
		{"no token, loopback", Config{HTTPAddr: "127.0.0.1:7070"}, false},
	} {
		var out strings.Builder
		c := tt.c
		c.Logger = slog.New(slog.NewTextHandler(&out, nil))
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: Validate() = %v", tt.name, err)
		}
		if got := strings.Contains(out.String(), "travels in clear"); got != tt.warn {
			t.Errorf("%s: warned %v (%q); want %v", tt.name, got, out.String(), tt.warn)
		}
	}
}
