// regtool: what the registry tests need around the reference registry, from the same pinned modules.
//
//	regtool cert DIR                 DIR/ca.pem + DIR/key.pem: a self-signed ECDSA certificate for
//	                                 127.0.0.1 and localhost (TLS for the registry and the token server);
//	                                 DIR/token.pem + DIR/jwks.json: the token server's signing key and
//	                                 the key set the registry trusts (key ID "gpudrv-test")
//	regtool htpasswd USER PASSWORD   one bcrypt htpasswd line on stdout (the registry's htpasswd auth)
//	regtool token ADDR DIR HTPASSWD ISSUER SERVICE
//	                                 a token server (the Docker token auth protocol) on https://ADDR/token:
//	                                 Basic credentials checked against HTPASSWD (anonymous: a token that
//	                                 grants nothing), a JWT signed with DIR/token.pem granting pull on
//	                                 the requested repositories (users named push*: every requested action)
package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/crypto/bcrypt"
)

const keyID = "gpudrv-test"

func main() {
	if len(os.Args) < 2 {
		fail("usage: regtool cert DIR | htpasswd USER PASSWORD | token ADDR DIR HTPASSWD ISSUER SERVICE")
	}
	switch args := os.Args[2:]; os.Args[1] {
	case "cert":
		need(args, 1)
		cert(args[0])
	case "htpasswd":
		need(args, 2)
		hash, err := bcrypt.GenerateFromPassword([]byte(args[1]), bcrypt.MinCost)
		check(err)
		fmt.Printf("%s:%s\n", args[0], hash)
	case "token":
		need(args, 5)
		serveTokens(args[0], args[1], args[2], args[3], args[4])
	default:
		fail("unknown command " + os.Args[1])
	}
}

func cert(dir string) {
	check(os.MkdirAll(dir, 0o700))
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	check(err)
	serial := time.Now().UnixNano()
	template := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		// A name of its own: a CA bundle trusting two test registries must tell their certificates apart
		// (OpenSSL looks a trust anchor up by subject name).
		Subject:               pkix.Name{CommonName: fmt.Sprintf("gpudrv test registry %d", serial)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	check(err)
	writePEM(filepath.Join(dir, "ca.pem"), "CERTIFICATE", der)
	writeKey(filepath.Join(dir, "key.pem"), key)

	signing, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	check(err)
	writeKey(filepath.Join(dir, "token.pem"), signing)
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &signing.PublicKey, KeyID: keyID, Algorithm: "ES256", Use: "sig"}}}
	data, err := json.Marshal(set)
	check(err)
	check(os.WriteFile(filepath.Join(dir, "jwks.json"), data, 0o600))
}

func writeKey(path string, key *ecdsa.PrivateKey) {
	der, err := x509.MarshalECPrivateKey(key)
	check(err)
	writePEM(path, "EC PRIVATE KEY", der)
}

func writePEM(path, kind string, der []byte) {
	check(os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
}

func serveTokens(addr, dir, htpasswd, issuer, service string) {
	block, _ := pem.Decode(read(filepath.Join(dir, "token.pem")))
	if block == nil {
		fail("token.pem: no PEM block")
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	check(err)
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: keyID}},
		(&jose.SignerOptions{}).WithType("JWT"),
	)
	check(err)
	users := readHtpasswd(htpasswd)
	http.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		subject, granted := "", false
		if user, password, ok := r.BasicAuth(); ok {
			hash, known := users[user]
			if !known || bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprintln(w, `{"details":"incorrect username or password"}`)
				return
			}
			subject, granted = user, true
		}
		if r.URL.Query().Get("service") != service {
			http.Error(w, "unknown service", http.StatusBadRequest)
			return
		}
		access := []map[string]any{}
		for _, scope := range r.URL.Query()["scope"] {
			parts := strings.Split(scope, ":")
			if granted && len(parts) == 3 && parts[0] == "repository" {
				actions := []string{"pull"}
				if strings.HasPrefix(subject, "push") {
					actions = strings.Split(parts[2], ",")
				}
				access = append(access, map[string]any{"type": "repository", "name": parts[1], "actions": actions})
			}
		}
		now := time.Now()
		claims := map[string]any{
			"iss": issuer, "sub": subject, "aud": service, "exp": now.Add(5 * time.Minute).Unix(),
			"nbf": now.Add(-time.Minute).Unix(), "iat": now.Unix(), "jti": fmt.Sprint(now.UnixNano()),
			"access": access,
		}
		payload, err := json.Marshal(claims)
		check(err)
		signed, err := signer.Sign(payload)
		check(err)
		token, err := signed.CompactSerialize()
		check(err)
		w.Header().Set("Content-Type", "application/json")
		check(json.NewEncoder(w).Encode(map[string]any{"token": token, "expires_in": 300, "issued_at": now.UTC().Format(time.RFC3339)}))
	})
	server := &http.Server{Addr: addr, ReadHeaderTimeout: 10 * time.Second}
	check(server.ListenAndServeTLS(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "key.pem")))
}

func readHtpasswd(path string) map[string][]byte {
	users := map[string][]byte{}
	scanner := bufio.NewScanner(strings.NewReader(string(read(path))))
	for scanner.Scan() {
		if user, hash, ok := strings.Cut(strings.TrimSpace(scanner.Text()), ":"); ok {
			users[user] = []byte(hash)
		}
	}
	return users
}

func read(path string) []byte {
	data, err := os.ReadFile(path)
	check(err)
	return data
}

func need(args []string, count int) {
	if len(args) != count {
		fail(fmt.Sprintf("%s takes %d arguments", os.Args[1], count))
	}
}

func check(err error) {
	if err != nil {
		fail(err.Error())
	}
}

func fail(message string) {
	fmt.Fprintln(os.Stderr, "regtool: "+message)
	os.Exit(2)
}
