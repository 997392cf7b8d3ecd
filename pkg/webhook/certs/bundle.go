// Package certs gives the webhook server a serving certificate when none is
// mounted: a self-signed CA and a serving certificate, kept in one Secret so
// that every replica serves the same chain, with the CA written into the
// executor's own webhook configurations.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Keys of the certificate Secret, as cert-manager and kubernetes.io/tls use them.
const (
	KeyCA   = "ca.crt"
	KeyCert = "tls.crt"
	KeyKey  = "tls.key"
)

// Validity of a generated chain, and how long before its end it is replaced.
const (
	Validity     = 10 * 365 * 24 * time.Hour
	RenewBefore  = 30 * 24 * time.Hour
	clockSkewPad = time.Hour
)

// Bundle is a CA and a serving certificate signed by it, PEM-encoded.
type Bundle struct {
	CA   []byte
	Cert []byte
	Key  []byte
}

// Generate makes a new CA and a serving certificate for hosts (DNS names or
// IP addresses). ECDSA P-256 keeps start-up cheap on a busy node.
func Generate(hosts []string, now time.Time) (Bundle, error) {
	if len(hosts) == 0 {
		return Bundle{}, errors.New("no host names for the serving certificate")
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Bundle{}, fmt.Errorf("generate CA key: %w", err)
	}
	notBefore, notAfter := now.Add(-clockSkewPad), now.Add(Validity)
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "executor-webhook-ca", Organization: []string{"flyte.org"}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return Bundle{}, fmt.Errorf("sign CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return Bundle{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Bundle{}, fmt.Errorf("generate serving key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return Bundle{}, fmt.Errorf("sign serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Bundle{}, err
	}
	return Bundle{
		CA:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

// Check says why b cannot serve hosts at now (and for RenewBefore after it),
// or returns its key pair.
func (b Bundle) Check(hosts []string, now time.Time) (tls.Certificate, error) {
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("serving key pair: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("serving certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b.CA) {
		return tls.Certificate{}, errors.New("no CA certificate")
	}
	for _, h := range hosts {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: h, Roots: pool, CurrentTime: now}); err != nil {
			return tls.Certificate{}, fmt.Errorf("serving certificate for %s: %w", h, err)
		}
	}
	if now.Add(RenewBefore).After(leaf.NotAfter) {
		return tls.Certificate{}, fmt.Errorf("serving certificate expires at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	pair.Leaf = leaf
	return pair, nil
}
