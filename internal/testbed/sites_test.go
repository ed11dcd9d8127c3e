package testbed

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// sitesTestInstance is TestSites' own testbed instance, apart from testInstance, so
// that it can run (go test -run TestSites) beside another run of this package's tests.
const sitesTestInstance = 231

// TestSites: two sites of two hosts with a 20 Mbit/s link between them. Inside a site
// hosts talk at full speed, between sites at about the site rate, in both directions,
// and the hosts of a site share their site's link. A host's own Rate still applies
// inside its site.
func TestSites(t *testing.T) {
	const siteMbit = 20
	b := upForTestOn(t, sitesTestInstance, Config{Nodes: 4, Sites: []int{2, 2}, SiteRate: "20mbit", Rate: []string{"", "", "", "8mbit"}})
	ctx := context.Background()
	hosts, err := b.Hosts()
	if err != nil {
		t.Fatal(err)
	}
	var sites []int
	for _, h := range hosts {
		sites = append(sites, h.Site)
	}
	if fmt.Sprint(sites) != "[1 1 2 2]" {
		t.Errorf("sites of n1..n4: got %v, want [1 1 2 2]", sites)
	}
	if n, rate, err := b.Sites(); n != 2 || rate != "20mbit" || err != nil {
		t.Errorf("Sites() = %d, %q, %v; want 2, 20mbit", n, rate, err)
	}
	ip := func(name string) string {
		h, err := b.Host(name)
		if err != nil {
			t.Fatal(err)
		}
		return h.IP
	}
	port := 5100
	// transfer sends size bytes from one host to another and returns the Mbit/s the
	// receiver saw.
	transfer := func(from, to string, size int) float64 {
		t.Helper()
		port++
		addr := fmt.Sprintf("%s:%d", ip(to), port)
		sink := start(t, b, to, true, helper("sink", addr)...)
		if _, err := b.Exec(ctx, from, helper("send", addr, strconv.Itoa(size))...); err != nil {
			t.Fatal(err)
		}
		var n int
		var secs float64
		fmt.Sscan(sink.line(t, 20*time.Second), &n, &secs)
		if n != size {
			t.Fatalf("%s → %s: %d bytes arrived, want %d", from, to, n, size)
		}
		mbit := float64(n) * 8 / secs / 1e6
		t.Logf("%s → %s: %d bytes in %.3f s: %.1f Mbit/s", from, to, n, secs, mbit)
		return mbit
	}

	tests := []struct {
		name     string
		from, to string
		size     int
		min, max float64 // Mbit/s
	}{
		{"inside site 1", "n1", "n2", 50_000_000, 5 * siteMbit, 0},
		{"site 1 to site 2", "n1", "n3", 1_250_000, siteMbit / 4, 2 * siteMbit}, // 0.5 s at the rate
		{"site 2 to site 1", "n3", "n2", 1_250_000, siteMbit / 4, 2 * siteMbit},
		{"inside site 2, to a host of 8 Mbit/s", "n3", "n4", 500_000, 8.0 / 4, 2 * 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := transfer(tt.from, tt.to, tt.size)
			if got < tt.min || (tt.max > 0 && got > tt.max) {
				t.Errorf("%s → %s at %.1f Mbit/s, want %g to %g", tt.from, tt.to, got, tt.min, tt.max)
			}
		})
	}

	t.Run("one link per site", func(t *testing.T) {
		// n1 and n2 both send to n3 at once: together they get the site's rate, not
		// twice it, as they would with a limit per host.
		const size = 1_250_000
		var wg sync.WaitGroup
		errs := make([]error, 2)
		var addrs []string
		var sinks []*started
		for i := range errs {
			addrs = append(addrs, fmt.Sprintf("%s:%d", ip("n3"), 5200+i))
			sinks = append(sinks, start(t, b, "n3", true, helper("sink", addrs[i])...))
		}
		began := time.Now()
		for i := range errs {
			wg.Add(1)
			go func(i int, from string) {
				defer wg.Done()
				_, errs[i] = b.Exec(ctx, from, helper("send", addrs[i], strconv.Itoa(size))...)
			}(i, fmt.Sprintf("n%d", i+1))
		}
		// From before the sends start until both sinks have read everything: a send
		// ends when its data is in the socket's buffer, not when it has arrived.
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		for _, s := range sinks {
			s.line(t, 20*time.Second)
		}
		elapsed := time.Since(began).Seconds()
		mbit := 2 * size * 8 / elapsed / 1e6
		t.Logf("n1 and n2 → n3 at once: %d bytes in %.2f s: %.1f Mbit/s together", 2*size, elapsed, mbit)
		if mbit > 1.5*siteMbit {
			t.Errorf("n1 and n2 → n3 at once: %.1f Mbit/s together, want at most the site rate %d (and some)", mbit, siteMbit)
		}
	})

	t.Run("site blocked from a site", func(t *testing.T) {
		for _, h := range []string{"n1", "n2", "n3", "n4"} {
			start(t, b, h, true, helper("serve", ip(h)+":5300")...)
		}
		reaches := func(from, to string) bool {
			_, err := b.Exec(ctx, from, helper("dial", ip(to)+":5300")...)
			return err == nil
		}
		check := func(when string, want map[[2]string]bool) {
			t.Helper()
			for pair, ok := range want {
				if got := reaches(pair[0], pair[1]); got != ok {
					t.Errorf("%s: %s reaches %s: %v, want %v", when, pair[0], pair[1], got, ok)
				}
			}
		}
		// s2 behind a NAT: it dials s1, s1 cannot dial it; inside each site all pass.
		if err := b.Block(ctx, "s2", "s1"); err != nil {
			t.Fatal(err)
		}
		check("s2 blocked from s1", map[[2]string]bool{
			{"n1", "n3"}: false, {"n2", "n4"}: false, {"n3", "n1"}: true, {"n4", "n2"}: true, {"n1", "n2"}: true, {"n3", "n4"}: true,
		})
		if err := b.Block(ctx, "s1", "s2"); err != nil {
			t.Fatal(err)
		}
		check("both ways", map[[2]string]bool{{"n3", "n1"}: false, {"n4", "n2"}: false, {"n2", "n1"}: true, {"n4", "n3"}: true})
		for _, pair := range [][2]string{{"s2", "s1"}, {"s1", "s2"}} {
			if err := b.Unblock(ctx, pair[0], pair[1]); err != nil {
				t.Fatal(err)
			}
		}
		check("unblocked", map[[2]string]bool{{"n1", "n3"}: true, {"n3", "n1"}: true})
	})

	t.Run("add to a site", func(t *testing.T) {
		if _, err := b.Add(ctx, HostConfig{Site: 3}); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Site = 3") {
			t.Errorf("Add to site 3 of 2: got %v, want ErrInvalidConfig naming Site = 3", err)
		}
		h, err := b.Add(ctx, HostConfig{Site: 1})
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != "n5" || h.Site != 1 {
			t.Errorf("Add: got %s in site %d, want n5 in site 1", h.Name, h.Site)
		}
		if got := transfer("n5", "n1", 20_000_000); got < 5*siteMbit {
			t.Errorf("n5 → n1 inside site 1 at %.1f Mbit/s, want more than %d", got, 5*siteMbit)
		}
		h, err = b.Add(ctx, HostConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if h.Site != 2 {
			t.Errorf("Add with no site: got site %d, want the last, 2", h.Site)
		}
	})
}
