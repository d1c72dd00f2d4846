// Command hello is the test image of test/node: an HTTP server that shows what the pod gave it
// (an environment variable and a file from a Secret volume), with a readiness endpoint.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
)

func main() {
	// -get fetches a URL and prints the body: the test runs the same binary as a client inside
	// the node's network namespace, where the pod's address is routed.
	get := flag.String("get", "", "print the body of this URL and exit")
	flag.Parse()
	if *get != "" {
		resp, err := http.Get(*get)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.Copy(os.Stdout, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
			log.Fatalf("GET %s: %s %v", *get, resp.Status, err)
		}
		return
	}
	addr := ":8080"
	if a := os.Getenv("LISTEN"); a != "" {
		addr = a
	}
	http.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		// Ready only once the Secret is readable: the probe then checks the volume too.
		if _, err := os.Stat(os.Getenv("SECRET_FILE")); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		secret, err := os.ReadFile(os.Getenv("SECRET_FILE"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "greeting=%s secret=%s uid=%d\n", os.Getenv("GREETING"), secret, os.Getuid())
	})
	secret, err := os.ReadFile(os.Getenv("SECRET_FILE"))
	log.Printf("listening on %s as uid %d, greeting %q, secret %q (%v)", addr, os.Getuid(), os.Getenv("GREETING"), secret, err)
	log.Fatal(http.ListenAndServe(addr, nil))
}
