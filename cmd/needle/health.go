package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// HealthCommand checks that a peer is ready: the probe of container images,
// which carry no curl.
type HealthCommand struct{ *Globals }

// Usage returns the help of health.
func (c *HealthCommand) Usage() string {
	return usageOf("usage: needle health [--timeout D]\n\n"+
		"Asks the peer at --addr for GET /healthz: exit 0 when it serves and every\n"+
		"partition has a reachable owner, 1 (with the reason) otherwise. The\n"+
		"container image's HEALTHCHECK runs it. A peer on a loopback address that\n"+
		"serves HTTPS (--tls-cert) where --addr says http:// (the image's default)\n"+
		"is asked again over HTTPS, its certificate checked only with --cacert: it\n"+
		"is the peer on this host, and /healthz carries no token.", c.flags(new(time.Duration)))
}

func (c *HealthCommand) flags(timeout *time.Duration) *flag.FlagSet {
	fs := c.flagSet("health")
	fs.DurationVar(timeout, "timeout", 5*time.Second, "give up after this long")
	return fs
}

// loopbackTLS is the client asking again over HTTPS a loopback peer that
// --addr names with http://, nil for any other address. It sends no token
// (/healthz needs none), and trusts the certificate the peer presents
// unless --cacert names a CA: a certificate made for the host's names
// rarely names 127.0.0.1, and a loopback connection cannot be
// intercepted but by the host itself.
func (c *HealthCommand) loopbackTLS() *api.Client {
	u, err := url.Parse(c.client().BaseURL)
	if err != nil || u.Scheme != "http" {
		return nil
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); !(host == "localhost" || ip != nil && ip.IsLoopback()) {
		return nil
	}
	u.Scheme = "https"
	tc := &api.Client{BaseURL: u.String()}
	if c.CACert != "" {
		tc.HTTP = &http.Client{Transport: caTransport(c.CACert)}
		return tc
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} // the peer on this host: see above
	tc.HTTP = &http.Client{Transport: t}
	return tc
}

// Run asks for /healthz.
func (c *HealthCommand) Run(ctx context.Context, args []string) error {
	var timeout time.Duration
	pos, err := parse(c.flags(&timeout), args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("health takes no arguments")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = c.client().Health(ctx)
	if errors.Is(err, api.ErrServesHTTPS) {
		if tc := c.loopbackTLS(); tc != nil {
			err = tc.Health(ctx)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", c.Addr, err)
	}
	fmt.Fprintln(c.Stdout, "ok")
	return nil
}
