package peer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeCert writes a self-signed certificate for 127.0.0.1 with serial
// serial, and its key, to cert and key.
func writeCert(t *testing.T, cert, key string, serial int64) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "needle test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Duration(serial) * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, cert, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, key, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})))
}

// servedSerial makes a new TLS connection to addr and answers the serial
// of the certificate the server presents.
func servedSerial(t *testing.T, addr string) int64 {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // the test reads the certificate, trusting none
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// A renewed certificate is served after ReloadTLS (SIGHUP) to the
// connections made from then on, with no restart; a pair that cannot be
// loaded (half written, a key of another certificate) keeps the one
// served; a bad pair at start stops New with an error naming the flags.
func TestTLSCertificateReloads(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeCert(t, cert, key, 1)
	p, _ := startPeerWith(t, Config{TLSCert: cert, TLSKey: key})
	if got := servedSerial(t, p.Addr()); got != 1 {
		t.Fatalf("serial served at start = %d; want 1", got)
	}
	writeCert(t, cert, key, 2)
	ok, notAfter, err := p.ReloadTLS()
	if !ok || err != nil || time.Until(notAfter) < time.Hour {
		t.Fatalf("ReloadTLS = %v, %v, %v; want the renewed certificate (2 h left)", ok, notAfter, err)
	}
	if got := servedSerial(t, p.Addr()); got != 2 {
		t.Fatalf("serial served after the reload = %d; want 2", got)
	}

	writeFile(t, key, "-----BEGIN EC PRIVATE KEY-----\ntruncat") // half written
	if ok, _, err := p.ReloadTLS(); ok || err == nil || !strings.Contains(err.Error(), "--tls-key") {
		t.Fatalf("ReloadTLS of a half-written key = %v, %v; want an error naming --tls-key", ok, err)
	}
	other := filepath.Join(dir, "other")
	writeCert(t, other+".crt", other+".key", 3)
	if err := os.Rename(other+".key", key); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := p.ReloadTLS(); ok || err == nil {
		t.Fatalf("ReloadTLS of a key of another certificate = %v, %v; want an error", ok, err)
	}
	if got := servedSerial(t, p.Addr()); got != 2 {
		t.Fatalf("serial served after failed reloads = %d; want 2 still", got)
	}

	_, err = New(Config{InMemory: true, TLSCert: cert, TLSKey: key})
	if err == nil || !strings.Contains(err.Error(), "--tls-cert") {
		t.Fatalf("New with a mismatched pair = %v; want an error naming --tls-cert", err)
	}
}

// Without TLS there is nothing to reload.
func TestReloadTLSWithoutTLS(t *testing.T) {
	p, _ := startPeerWith(t, Config{})
	if ok, _, err := p.ReloadTLS(); ok || err != nil {
		t.Fatalf("ReloadTLS without TLS = %v, %v; want false, nil", ok, err)
	}
}

// writeFile writes data to path, private to the user.
func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
