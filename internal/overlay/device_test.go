package overlay

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"
)

// A packet sent to an address of the prefix leaves through the device, and
// one written into it arrives at a local socket. Run in its own network
// namespace (unshare), since it needs root and must not take the host's shoal0.
func TestDevice(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root (CAP_NET_ADMIN) for a TUN device")
	}
	if os.Getenv("SHOAL_OVERLAY_NETNS") == "" {
		if _, err := exec.LookPath("unshare"); err != nil {
			t.Skip("no unshare to give the test its own network namespace")
		}
		cmd := exec.Command("unshare", "--net", os.Args[0], "-test.run", "^TestDevice$", "-test.v")
		cmd.Env = append(os.Environ(), "SHOAL_OVERLAY_NETNS=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("in a new network namespace: %v\n%s", err, out)
		}
		return
	}
	self := netip.MustParseAddr("100.64.0.1")
	d, err := OpenDevice("shoaltest0", self, Prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// Out: a UDP datagram to a peer's address is read from the device.
	conn, err := net.Dial("udp4", "100.64.0.2:9")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	done := make(chan []byte, 1)
	go func() {
		buf := make([]byte, MTU)
		for {
			n, err := d.Read(buf)
			if err != nil {
				close(done)
				return
			}
			if dst, ok := Destination(buf[:n]); ok && dst.String() == "100.64.0.2" {
				done <- append([]byte(nil), buf[:n]...)
				return
			}
		}
	}()
	conn.Write([]byte("hello"))
	var pkt []byte
	select {
	case pkt = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("no packet for 100.64.0.2 read from the device in 5 s")
	}
	if src, _ := Source(pkt); src != self {
		t.Errorf("packet's source %v, want %v", src, self)
	}
	// In: the same datagram, addresses swapped, written into the device,
	// reaches a socket listening on self.
	ln, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP("100.64.0.1"), Port: 9})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	in := append([]byte(nil), pkt...)
	copy(in[12:16], pkt[16:20])
	copy(in[16:20], pkt[12:16])
	in[10], in[11] = 0, 0 // the IPv4 checksum is the same for swapped addresses
	copy(in[10:12], pkt[10:12])
	in[26], in[27] = 0, 0 // no UDP checksum
	if _, err := d.Write(in); err != nil {
		t.Fatal(err)
	}
	ln.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 100)
	n, _, err := ln.ReadFromUDP(buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Errorf("read %q, %v; want hello", buf[:n], err)
	}
}
