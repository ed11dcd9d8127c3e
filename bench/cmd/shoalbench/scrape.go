package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"time"

	"shoal/internal/agent"
	"shoal/internal/api"
	"shoal/internal/pki"
)

// scrapeMain times GET /metrics of one agent against GET /v1/nodes of the
// same agent, alternating, each on a kept-alive TLS connection
// (bench/metrics-scrape).
func scrapeMain(args []string) int {
	fs := flag.NewFlagSet("scrape", flag.ContinueOnError)
	addr := fs.String("addr", "", "the agent's API address, IP:PORT")
	secretFile := fs.String("secret", "", "the cluster secret file")
	n := fs.Int("n", 100, "scrapes of each kind")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *addr == "" || *secretFile == "" || *n < 1 {
		fmt.Fprintln(os.Stderr, "shoalbench scrape: want -addr IP:PORT, -secret FILE and -n ≥ 1")
		return 2
	}
	secret, err := agent.ReadSecret(*secretFile)
	if err != nil {
		return scrapeFail(err)
	}
	id, err := pki.ClientIdentity(secret, "shoalbench")
	if err != nil {
		return scrapeFail(err)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: id.ClientConfig()}}
	node := api.NewClients(secret).Get(*addr)
	ctx := context.Background()
	var size int
	scrape := func() (time.Duration, error) {
		t0 := time.Now()
		resp, err := hc.Get("https://" + *addr + "/metrics")
		if err != nil {
			return 0, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("GET /metrics: %s: %s", resp.Status, b)
		}
		size = len(b)
		return time.Since(t0), err
	}
	nodes := func() (time.Duration, error) {
		t0 := time.Now()
		_, err := node.Nodes(ctx)
		return time.Since(t0), err
	}
	for range 3 { // connections, certificates, the first read of the job's events
		if _, err := scrape(); err != nil {
			return scrapeFail(err)
		}
		if _, err := nodes(); err != nil {
			return scrapeFail(err)
		}
	}
	var ms, ns []float64
	for range *n {
		d, err := scrape()
		if err != nil {
			return scrapeFail(err)
		}
		ms = append(ms, d.Seconds()*1000)
		if d, err = nodes(); err != nil {
			return scrapeFail(err)
		}
		ns = append(ns, d.Seconds()*1000)
	}
	m, nd := quantile(ms, 0.5), quantile(ns, 0.5)
	fmt.Printf("%d scrapes of each, alternating, from %s\n", *n, *addr)
	fmt.Printf("%-16s %10s %10s %10s\n", "request", "median", "p90", "max")
	fmt.Printf("%-16s %8.2f ms %7.2f ms %7.2f ms  (%d bytes)\n", "GET /metrics", m, quantile(ms, 0.9), slices.Max(ms), size)
	fmt.Printf("%-16s %8.2f ms %7.2f ms %7.2f ms\n", "GET /v1/nodes", nd, quantile(ns, 0.9), slices.Max(ns))
	fmt.Printf("RESULT scrape_ms=%.2f nodes_ms=%.2f scrape_over_nodes_ms=%.2f scrape_p90_ms=%.2f scrape_bytes=%d\n",
		m, nd, m-nd, quantile(ms, 0.9), size)
	return 0
}

// quantile returns the q-quantile of xs, nearest rank.
func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func scrapeFail(err error) int {
	fmt.Fprintf(os.Stderr, "shoalbench scrape: %v\n", err)
	return 1
}
