// Command hello is the test image of test/node: an HTTP server that shows what the pod gave it
// (an environment variable and a file from a Secret volume), with a readiness endpoint.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	// -get fetches a URL and prints the body: the test runs the same binary as a client inside
	// the node's network namespace, where the pod's address is routed.
	get := flag.String("get", "", "print the body of this URL and exit")
	// -resolve looks names up as any program in the pod would (its resolv.conf, search path
	// and ndots), one line each, and goes on to -get; a name that fails is printed, not fatal,
	// since the test expects some to fail.
	var names []string
	flag.Func("resolve", "look this name up and print its addresses (repeatable), then exit or -get", func(s string) error {
		names = append(names, s)
		return nil
	})
	flag.Parse()
	if len(names) > 0 {
		resolve(names)
		if *get == "" {
			return
		}
	}
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

func resolve(names []string) {
	if b, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		fmt.Printf("resolv.conf: %s\n", strings.Join(strings.Fields(strings.ReplaceAll(string(b), "\n", " ; ")), " "))
	}
	for _, name := range names {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		start := time.Now()
		addrs, err := net.DefaultResolver.LookupHost(ctx, name)
		cancel()
		took := time.Since(start).Round(time.Millisecond)
		if err != nil {
			fmt.Printf("resolve %s: error after %s: %v\n", name, took, err)
			continue
		}
		fmt.Printf("resolve %s: %s in %s\n", name, strings.Join(addrs, ","), took)
	}
}
