package overlay

import (
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// agentPorts are the agents' ports on the testbed (testbed.AgentPort and the
// two after it): gossip (encrypted), the API and the job store's Raft, both
// TLS. Every tunnel of the overlay is a connection to the API port.
var agentPorts = []uint16{7946, 7947, 7948}

// capture counts the TCP segments crossing a bridge, those to or from none of
// the agents' ports apart, and the frames of any kind that hold zeroRun zero
// bytes in a row: a piece of heat's first halo rows, whose interior is 0.0
// (what no TLS record nor encrypted gossip packet holds). It reads an AF_PACKET socket in promiscuous mode, so
// that it sees what the bridge forwards between its ports, not only what it
// receives itself: what tcpdump -i BRIDGE shows.
type capture struct {
	fd    int
	done  atomic.Bool
	wg    sync.WaitGroup
	mu    sync.Mutex
	total int
	other []string // "src:port > dst:port", the first few
	zeros int      // frames with zeroRun zero bytes in a row
}

// zeroRun is long enough that only a frame carrying a run of zeros in clear
// holds it (a TCP segment of a halo row of heat --size 200 carries up to
// 1,448 of its 1,600 zero bytes), short enough for any such segment.
const zeroRun = 256

func startCapture(bridge string, allowed []uint16) (*capture, error) {
	ifi, err := net.InterfaceByName(bridge)
	if err != nil {
		return nil, err
	}
	proto := htons(unix.ETH_P_ALL)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	mreq := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// A read returns within 200 ms, so that stop ends the reader.
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200_000})
	c := &capture{fd: fd}
	c.wg.Add(1)
	go c.read(allowed)
	return c, nil
}

func (c *capture) read(allowed []uint16) {
	defer c.wg.Done()
	buf := make([]byte, 65536)
	for !c.done.Load() {
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		c.count(buf[:n], allowed)
	}
}

// count reads one Ethernet frame.
func (c *capture) count(f []byte, allowed []uint16) {
	if hasZeroRun(f) {
		c.mu.Lock()
		c.zeros++
		c.mu.Unlock()
	}
	if len(f) < 14+20 || binary.BigEndian.Uint16(f[12:14]) != unix.ETH_P_IP {
		return
	}
	ip := f[14:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[9] != unix.IPPROTO_TCP || len(ip) < ihl+4 {
		return
	}
	sport, dport := binary.BigEndian.Uint16(ip[ihl:]), binary.BigEndian.Uint16(ip[ihl+2:])
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total++
	if slices.Contains(allowed, sport) || slices.Contains(allowed, dport) {
		return
	}
	if len(c.other) < 10 {
		c.other = append(c.other, fmt.Sprintf("%v:%d > %v:%d", net.IP(ip[12:16]), sport, net.IP(ip[16:20]), dport))
	}
}

func hasZeroRun(f []byte) bool {
	run := 0
	for _, b := range f {
		if b != 0 {
			run = 0
		} else if run++; run == zeroRun {
			return true
		}
	}
	return false
}

// stop ends the capture (later calls do nothing) and returns the segments
// outside the allowed ports and how many TCP segments it saw.
func (c *capture) stop() (other []string, total int) {
	c.end()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.other, c.total
}

// zeroFrames ends the capture and returns how many frames held zeroRun zero
// bytes in a row.
func (c *capture) zeroFrames() int {
	c.end()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.zeros
}

func (c *capture) end() {
	if !c.done.Swap(true) {
		c.wg.Wait()
		unix.Close(c.fd)
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
