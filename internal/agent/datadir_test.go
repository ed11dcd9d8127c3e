package agent

import (
	"net"
	"testing"
)

func TestAddresses(t *testing.T) {
	tcp := func(ip string, port int) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: port} }
	for _, tt := range []struct {
		listen      net.Addr
		asked       string
		local, anno string
	}{
		{tcp("10.0.0.2", 7947), "10.0.0.2:7947", "10.0.0.2:7947", "10.0.0.2:7947"},
		{tcp("::", 7947), "0.0.0.0:7947", "127.0.0.1:7947", "192.0.2.2:7947"},
		{tcp("0.0.0.0", 7947), "0.0.0.0:7947", "127.0.0.1:7947", "192.0.2.2:7947"},
		{tcp("::", 7947), "[::]:7947", "[::1]:7947", "192.0.2.2:7947"},
	} {
		if got := localAddr(tt.listen, tt.asked); got != tt.local {
			t.Errorf("localAddr(%v, %q) = %s, want %s", tt.listen, tt.asked, got, tt.local)
		}
		if got := announcedAddr(tt.listen, "192.0.2.2:7946"); got != tt.anno {
			t.Errorf("announcedAddr(%v) = %s, want %s", tt.listen, got, tt.anno)
		}
	}
}
