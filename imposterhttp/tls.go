package imposterhttp

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
	"time"

	"github.com/fenceline/fenceline/imposter"
)

// tlsConfig is an https imposter's TLS: the key and certificate its
// creation request gives (PEM), or a self-signed pair the server made
// once for all its https imposters. mutualAuth asks clients for a
// certificate without checking it (as mountebank does unless
// rejectUnauthorized and ca say otherwise).
func (s *Server) tlsConfig(imp *imposter.Imposter, creation *imposter.Object) (*tls.Config, error) {
	keyPEM, certPEM := pemPair(creation)
	if err := checkTLS(creation); err != nil {
		return nil, err
	}
	if keyPEM == "" {
		var err error
		if keyPEM, certPEM, err = s.selfSigned(); err != nil {
			return nil, &imposter.Error{Code: imposter.CodeCannotStart, Message: "cannot make a certificate: " + err.Error()}
		}
	}
	pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		return nil, &imposter.Error{Code: imposter.CodeBadData, Message: "the https imposter's key and cert do not load: " + err.Error()}
	}
	imp.KeyPEM, imp.CertPEM = keyPEM, certPEM
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if mutual, _ := creation.Get("mutualAuth"); mutual == true {
		cfg.ClientAuth = tls.RequestClientCert
	}
	return cfg, nil
}

func pemPair(creation *imposter.Object) (keyPEM, certPEM string) {
	key, _ := creation.Get("key")
	cert, _ := creation.Get("cert")
	keyPEM, _ = key.(string)
	certPEM, _ = cert.(string)
	return keyPEM, certPEM
}

// checkTLS reports an https creation's key and cert that will not load,
// before the change is proposed: every node would fail to bind it.
func checkTLS(creation *imposter.Object) error {
	if proto, _ := creation.Get("protocol"); proto != "https" {
		return nil
	}
	keyPEM, certPEM := pemPair(creation)
	if (keyPEM == "") != (certPEM == "") {
		return &imposter.Error{Code: imposter.CodeBadData, Message: "an https imposter needs both key and cert, or neither"}
	}
	if keyPEM == "" {
		return nil
	}
	if _, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM)); err != nil {
		return &imposter.Error{Code: imposter.CodeBadData, Message: "the https imposter's key and cert do not load: " + err.Error()}
	}
	return nil
}

// selfSigned returns the server's self-signed key and certificate for
// localhost, made on first use.
func (s *Server) selfSigned() (keyPEM, certPEM string, err error) {
	s.certOnce.Do(func() {
		var k *ecdsa.PrivateKey
		if k, s.certErr = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); s.certErr != nil {
			return
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(time.Now().UnixNano()),
			Subject:      pkix.Name{CommonName: "localhost", Organization: []string{"fenceline imposter"}},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().AddDate(10, 0, 0),
			KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			DNSNames:     []string{"localhost"},
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		}
		var der []byte
		if der, s.certErr = x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k); s.certErr != nil {
			return
		}
		var kb []byte
		if kb, s.certErr = x509.MarshalECPrivateKey(k); s.certErr != nil {
			return
		}
		s.keyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
		s.certPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	})
	return s.keyPEM, s.certPEM, s.certErr
}
