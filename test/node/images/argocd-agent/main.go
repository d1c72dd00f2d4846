// Command argocd-agent is the stand-in for argocd-agent's image on the local fleet, whose
// module cannot be fetched here to build the real one. It takes the agent Deployment's
// arguments and does the part of the agent that the tests observe from outside the pod:
//
//   - it reads its client certificate (--tls-client-cert) once, at start-up, as argocd-agent
//     v0.9.0 does, and logs its fingerprint, so a test reading the container's log sees which
//     certificate each start used;
//   - it serves --healthz-port, answering 200 on /healthz while that certificate is within its
//     validity (the real agent answers 200 while connected to the principal, which refuses an
//     expired certificate), so the Deployment's probes, and OCM's Available condition fed
//     back from it, are the kubelet's own;
//   - it exits 0 on SIGTERM, as the cert-reloader sidecar makes it do.
//
// Its binary is named argocd-agent: the cert-reloader finds the agent by that name.
package main

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	fs := flag.NewFlagSet("argocd-agent", flag.ContinueOnError)
	certPath := fs.String("tls-client-cert", "", "client certificate (PEM)")
	healthzPort := fs.Int("healthz-port", 8002, "port of /healthz")
	// The agent's other flags are accepted and ignored; the first argument is its subcommand.
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "agent" {
		args = args[1:]
	}
	if err := fs.Parse(known(args, "tls-client-cert", "healthz-port")); err != nil {
		log.Fatal(err)
	}
	cert, err := readCertificate(*certPath)
	if err != nil {
		log.Fatalf("stand-in agent: %v", err)
	}
	log.Printf("stand-in agent: loaded certificate %s CN=%s notAfter=%s", fingerprint(cert), cert.Subject.CommonName, cert.NotAfter.UTC().Format(time.RFC3339))

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if now := time.Now(); now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
			http.Error(w, "client certificate outside its validity", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Addr: net.JoinHostPort("", strconv.Itoa(*healthzPort)), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Fatal(err)
		}
	}()
	log.Printf("stand-in agent: got %v, exiting", <-sigs)
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
}

// known keeps the --name=value arguments whose name is one of names.
func known(args []string, names ...string) []string {
	var out []string
	for _, a := range args {
		for _, n := range names {
			if strings.HasPrefix(a, "--"+n+"=") {
				out = append(out, a)
			}
		}
	}
	return out
}

func readCertificate(path string) (*x509.Certificate, error) {
	if path == "" {
		return nil, errors.New("no --tls-client-cert")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return x509.ParseCertificate(block.Bytes)
}

// fingerprint is the upper-case hex SHA-256 of the certificate, as the project's blocklist
// and ledger name certificates.
func fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}
