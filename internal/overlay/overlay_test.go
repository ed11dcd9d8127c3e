package overlay

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"testing"
)

func TestCandidate(t *testing.T) {
	seen := map[netip.Addr]string{}
	for _, name := range []string{"n1", "n2", "n3", "phone", "lab-pc-17", ""} {
		for i := range 3 {
			a := Candidate(name, i)
			if !Prefix.Contains(a) || a == Prefix.Addr() || a == netip.MustParseAddr("100.127.255.255") {
				t.Errorf("Candidate(%q, %d) = %v, want a host address in %v", name, i, a, Prefix)
			}
			if again := Candidate(name, i); again != a {
				t.Errorf("Candidate(%q, %d) = %v then %v, want the same", name, i, a, again)
			}
			if other, dup := seen[a]; dup {
				t.Errorf("Candidate(%q, %d) = %v, as %s's", name, i, a, other)
			}
			seen[a] = name
		}
	}
}

func TestChoose(t *testing.T) {
	b0, b1 := Candidate("b", 0), Candidate("b", 1)
	tests := []struct {
		name  string
		taken map[netip.Addr]string
		want  netip.Addr
	}{
		{"nobody", nil, b0},
		{"itself", map[netip.Addr]string{b0: "b"}, b0},
		{"a greater name moves", map[netip.Addr]string{b0: "c"}, b0},
		{"a smaller name keeps it", map[netip.Addr]string{b0: "a"}, b1},
		{"and the next one too", map[netip.Addr]string{b0: "a", b1: "a"}, Candidate("b", 2)},
		{"others elsewhere", map[netip.Addr]string{Candidate("a", 0): "a"}, b0},
	}
	for _, tt := range tests {
		got, ok := Choose("b", tt.taken)
		if !ok || got != tt.want {
			t.Errorf("%s: Choose(b, %v) = %v, %v; want %v, true", tt.name, tt.taken, got, ok, tt.want)
		}
	}
	all := map[netip.Addr]string{}
	for i := range maxAttempts {
		all[Candidate("b", i)] = "a"
	}
	if got, ok := Choose("b", all); ok {
		t.Errorf("Choose with every candidate held by a smaller name = %v, true; want false", got)
	}
}

// Two nodes whose first candidates collide agree on who moves: the table
// routes the address to the smaller name until the greater one has moved.
func TestTableOwner(t *testing.T) {
	a := netip.MustParseAddr("100.64.1.2")
	b := netip.MustParseAddr("100.70.0.9")
	tab := NewTable([]Member{
		{Name: "n2", Addr: a}, {Name: "n1", Addr: a}, {Name: "n3", Addr: b},
		{Name: "old", Addr: netip.Addr{}}, {Name: "lan", Addr: netip.MustParseAddr("10.0.0.1")},
	})
	tests := []struct {
		addr netip.Addr
		want string
		ok   bool
	}{
		{a, "n1", true},
		{b, "n3", true},
		{netip.MustParseAddr("10.0.0.1"), "", false},
		{netip.MustParseAddr("100.64.0.7"), "", false},
	}
	for _, tt := range tests {
		got, ok := tab.Owner(tt.addr)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Owner(%v) = %q, %v; want %q, %v", tt.addr, got, ok, tt.want, tt.ok)
		}
	}
	if got, ok := tab.Addr("n3"); !ok || got != b {
		t.Errorf("Addr(n3) = %v, %v; want %v, true", got, ok, b)
	}
	if got, ok := tab.Addr("n2"); ok {
		t.Errorf("Addr(n2) = %v, true; want none (n1 owns it)", got)
	}
}

func ipv4(src, dst string) []byte {
	p := make([]byte, 28)
	p[0] = 0x45
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(p[12:], s[:])
	copy(p[16:], d[:])
	return p
}

func TestAddresses(t *testing.T) {
	tests := []struct {
		name     string
		pkt      []byte
		src, dst string
		ok       bool
	}{
		{"ipv4", ipv4("100.64.0.1", "100.64.0.2"), "100.64.0.1", "100.64.0.2", true},
		{"short", ipv4("100.64.0.1", "100.64.0.2")[:19], "", "", false},
		{"ipv6", append([]byte{0x60}, make([]byte, 39)...), "", "", false},
		{"empty", nil, "", "", false},
	}
	for _, tt := range tests {
		src, ok1 := Source(tt.pkt)
		dst, ok2 := Destination(tt.pkt)
		if ok1 != tt.ok || ok2 != tt.ok {
			t.Errorf("%s: ok %v, %v; want %v", tt.name, ok1, ok2, tt.ok)
			continue
		}
		if tt.ok && (src.String() != tt.src || dst.String() != tt.dst) {
			t.Errorf("%s: %v -> %v, want %s -> %s", tt.name, src, dst, tt.src, tt.dst)
		}
	}
}

func TestFrames(t *testing.T) {
	var stream bytes.Buffer
	pkts := [][]byte{{1}, bytes.Repeat([]byte{7}, MTU), ipv4("100.64.0.1", "100.64.0.2")}
	for _, p := range pkts {
		if err := WriteFrame(&stream, p); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, MTU)
	for i, want := range pkts {
		got, err := ReadFrame(&stream, buf)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("frame %d: %d bytes, %v; want %d bytes", i, len(got), err, len(want))
		}
	}
	if _, err := ReadFrame(&stream, buf); err != io.EOF {
		t.Errorf("after the last frame: %v, want io.EOF", err)
	}
	for _, tt := range []struct {
		name string
		in   []byte
		want error
	}{
		{"zero length", []byte{0, 0}, ErrFrame},
		{"beyond the MTU", []byte{0xff, 0xff}, ErrFrame},
		{"cut in the packet", []byte{0, 4, 1, 2}, io.ErrUnexpectedEOF},
		{"cut in the header", []byte{0}, io.ErrUnexpectedEOF},
	} {
		if _, err := ReadFrame(bytes.NewReader(tt.in), buf); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	for _, n := range []int{0, MTU + 1} {
		if err := WriteFrame(io.Discard, make([]byte, n)); !errors.Is(err, ErrFrame) {
			t.Errorf("WriteFrame of %d bytes: %v, want ErrFrame", n, err)
		}
	}
}

func TestKeep(t *testing.T) {
	tests := []struct {
		local, peer, dialer string
		want                bool
	}{
		{"n1", "n2", "n1", true},
		{"n1", "n2", "n2", false},
		{"n2", "n1", "n1", true},
		{"n2", "n1", "n2", false},
	}
	for _, tt := range tests {
		if got := Keep(tt.local, tt.peer, tt.dialer); got != tt.want {
			t.Errorf("Keep(%s, %s, dialled by %s) = %v, want %v", tt.local, tt.peer, tt.dialer, got, tt.want)
		}
	}
}
