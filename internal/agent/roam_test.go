package agent

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"shoal/internal/node"
)

func ips(ss ...string) []net.IP {
	var out []net.IP
	for _, s := range ss {
		out = append(out, net.ParseIP(s))
	}
	return out
}

func TestMoved(t *testing.T) {
	tests := []struct {
		name   string
		bound  string
		now    []net.IP
		want   string
		wantOK bool
	}{
		{name: "still there", bound: "10.77.0.13", now: ips("10.77.0.13", "fe80::1"), wantOK: false},
		{name: "still there among others", bound: "10.77.0.13", now: ips("10.77.0.103", "10.77.0.13"), wantOK: false},
		{name: "gone, none yet", bound: "10.77.0.13", now: nil, wantOK: false},
		{name: "gone, only link-local", bound: "10.77.0.13", now: ips("fe80::1", "169.254.3.4"), wantOK: false},
		{name: "moved", bound: "10.77.0.13", now: ips("fe80::1", "10.77.0.103"), want: "10.77.0.103", wantOK: true},
		{name: "moved to another network", bound: "192.168.1.20", now: ips("100.64.7.9"), want: "100.64.7.9", wantOK: true},
		{name: "IPv6 bound, IPv4 only is no move", bound: "fd00::13", now: ips("10.77.0.103"), wantOK: false},
		{name: "IPv6 moved", bound: "fd00::13", now: ips("10.77.0.103", "fd00::103"), want: "fd00::103", wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Moved(net.ParseIP(tt.bound), tt.now)
			if ok != tt.wantOK || (ok && got.String() != tt.want) {
				t.Errorf("Moved(%s, %v) = %v, %v; want %s, %v", tt.bound, tt.now, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestRejoined(t *testing.T) {
	at := func(name, addr, state string) node.Node { return node.Node{Name: name, Addr: addr, State: state} }
	const newAddr = "10.77.0.103:7946"
	tests := []struct {
		name  string
		views [][]node.Node
		want  bool
	}{
		{name: "nobody asked", views: nil, want: false},
		{name: "all see it", views: [][]node.Node{
			{at("n1", "10.77.0.11:7946", "alive"), at("n3", newAddr, "alive")},
			{at("n3", newAddr, "alive")},
		}, want: true},
		{name: "one holds the old address", views: [][]node.Node{
			{at("n3", newAddr, "alive")},
			{at("n3", "10.77.0.13:7946", "alive")},
		}, want: false},
		{name: "one holds it dead at the old one", views: [][]node.Node{
			{at("n3", "10.77.0.13:7946", "dead")},
		}, want: false},
		{name: "new address but suspect", views: [][]node.Node{
			{at("n3", newAddr, "suspect")},
		}, want: false},
		{name: "one does not list it", views: [][]node.Node{
			{at("n3", newAddr, "alive")},
			{at("n1", "10.77.0.11:7946", "alive")},
		}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Rejoined("n3", newAddr, tt.views); got != tt.want {
				t.Errorf("Rejoined(n3, %s, %v) = %v, want %v", newAddr, tt.views, got, tt.want)
			}
		})
	}
}

func TestTakeMoved(t *testing.T) {
	dir := t.TempDir()
	if got, err := takeMoved(dir); got != "" || err != nil {
		t.Fatalf("takeMoved(no file) = %q, %v; want \"\", nil", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, MovedFile), []byte("10.77.0.13:7946\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := takeMoved(dir); got != "10.77.0.13:7946" || err != nil {
		t.Fatalf("takeMoved = %q, %v; want 10.77.0.13:7946, nil", got, err)
	}
	if got, err := takeMoved(dir); got != "" || err != nil {
		t.Fatalf("takeMoved a second time = %q, %v; want \"\", nil (the file is taken)", got, err)
	}
}

func TestWatched(t *testing.T) {
	tests := []struct {
		bind, advertised string
		wantAddr         string // "": nothing to follow
		wantAny          bool
		wantRebind       string // after a move to 10.77.0.103
	}{
		{bind: "10.77.0.13:7946", advertised: "10.77.0.13:7946", wantAddr: "10.77.0.13", wantRebind: "10.77.0.103:7946"},
		{bind: "0.0.0.0:7946", advertised: "192.168.1.20:7946", wantAddr: "192.168.1.20", wantAny: true, wantRebind: "0.0.0.0:7946"},
		{bind: "0.0.0.0:7946", advertised: "127.0.0.1:7946"},
		{bind: "127.0.0.1:0", advertised: "127.0.0.1:41234"},
		{bind: "not-an-ip:7946", advertised: "10.77.0.13:7946"},
	}
	for _, tt := range tests {
		addr, anyIface, rebind, ok := watched(tt.bind, tt.advertised)
		if !ok {
			if tt.wantAddr != "" {
				t.Errorf("watched(%s, %s): nothing to follow, want %s", tt.bind, tt.advertised, tt.wantAddr)
			}
			continue
		}
		if tt.wantAddr == "" {
			t.Errorf("watched(%s, %s) = %s, want nothing to follow", tt.bind, tt.advertised, addr)
			continue
		}
		if got := rebind(net.ParseIP("10.77.0.103")); addr.String() != tt.wantAddr || anyIface != tt.wantAny || got != tt.wantRebind {
			t.Errorf("watched(%s, %s) = %s, any interface %v, rebind %s; want %s, %v, %s",
				tt.bind, tt.advertised, addr, anyIface, got, tt.wantAddr, tt.wantAny, tt.wantRebind)
		}
	}
}
