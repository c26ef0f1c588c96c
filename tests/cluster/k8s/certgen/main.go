// Command certgen writes the PKI of the local test cluster (scripts/cluster):
// a CA, the kube-apiserver serving certificate for 127.0.0.1, the
// service-account signing key pair and one client certificate per component.
// Standard library only, so the cluster needs no openssl.
//
// Usage: certgen DIR
package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// validity is long on purpose: the cluster is local and throwaway, and an
// expired certificate in a long-lived state dir would be a confusing failure.
const validity = 10 * 365 * 24 * time.Hour

// clients maps a file stem to the subject the apiserver authenticates it as
// (CN = user, O = groups).
var clients = []struct {
	stem string
	cn   string
	orgs []string
}{
	{"admin", "gpudrv-admin", []string{"system:masters"}},
	{"kube-controller-manager", "system:kube-controller-manager", nil},
	{"kube-scheduler", "system:kube-scheduler", nil},
	// kwok writes node and pod status; no bootstrap role covers that.
	{"kwok-controller", "kwok-controller", []string{"system:masters"}},
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: certgen DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "certgen:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour) // tolerate small clock skew
	caKey, err := newKey()
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "gpudrv-test-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := sign(caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writeCertKey(dir, "ca", caDER, caKey); err != nil {
		return err
	}

	// Serving certificate: reachable as 127.0.0.1/localhost from the host and
	// under the in-cluster names (service IP of 10.96.0.0/16).
	srvKey, err := newKey()
	if err != nil {
		return err
	}
	srvDER, err := sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:   now,
		NotAfter:    now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
	}, caCert, srvKey.Public(), caKey)
	if err != nil {
		return err
	}
	if err := writeCertKey(dir, "apiserver", srvDER, srvKey); err != nil {
		return err
	}

	for _, c := range clients {
		key, err := newKey()
		if err != nil {
			return err
		}
		der, err := sign(&x509.Certificate{
			Subject:     pkix.Name{CommonName: c.cn, Organization: c.orgs},
			NotBefore:   now,
			NotAfter:    now.Add(validity),
			KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}, caCert, key.Public(), caKey)
		if err != nil {
			return err
		}
		if err := writeCertKey(dir, c.stem, der, key); err != nil {
			return err
		}
	}

	// Service-account token signing key (private for the apiserver and the
	// controller-manager, public for token verification).
	saKey, err := newKey()
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, "sa.key"), saKey); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub)
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	return x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
}

func writeCertKey(dir, stem string, der []byte, key *ecdsa.PrivateKey) error {
	if err := writePEM(filepath.Join(dir, stem+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, stem+".key"), key)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
