package peer

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"sync/atomic"
	"time"
)

// certFiles serves the API's TLS certificate from --tls-cert and --tls-key,
// read at start and again at each ReloadTLS (SIGHUP): a renewed
// certificate (cert-manager, certbot) takes no restart. A pair that cannot
// be read or does not match keeps the one served.
type certFiles struct {
	cert, key string
	cur       atomic.Pointer[tls.Certificate]
}

// newCertFiles reads the pair: an error names the flags, so a bad path or
// a key of another certificate stops the daemon at start.
func newCertFiles(cert, key string) (*certFiles, error) {
	c := &certFiles{cert: cert, key: key}
	if _, err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

// load reads the pair and serves it from now on; it answers when the new
// certificate expires.
func (c *certFiles) load() (time.Time, error) {
	pair, err := tls.LoadX509KeyPair(c.cert, c.key)
	if err != nil {
		return time.Time{}, fmt.Errorf("peer: --tls-cert %s, --tls-key %s: %w", c.cert, c.key, err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return time.Time{}, fmt.Errorf("peer: --tls-cert %s: %w", c.cert, err)
		}
		pair.Leaf = leaf
	}
	c.cur.Store(&pair)
	return leaf.NotAfter, nil
}

// get is the server's tls.Config.GetCertificate.
func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.cur.Load(), nil }

// tlsConfig is the API server's TLS configuration.
func (c *certFiles) tlsConfig() *tls.Config {
	return &tls.Config{GetCertificate: c.get, MinVersion: tls.VersionTLS12}
}

// ReloadTLS reads --tls-cert and --tls-key again and serves them to the
// connections made from now on (SIGHUP); it answers when the certificate
// now served expires. Without TLS it does nothing (ok false). On an error
// (a file half written, a key of another certificate) the certificate
// served stays.
func (p *Peer) ReloadTLS() (ok bool, notAfter time.Time, err error) {
	if p.certs == nil {
		return false, time.Time{}, nil
	}
	notAfter, err = p.certs.load()
	return err == nil, notAfter, err
}
