package api

import (
	"crypto/tls"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// kernelRTT is the least round trip the kernel's TCP stack measured on conn
// (tcpi_min_rtt: from its handshake and the acknowledgements of its segments),
// 0 when it cannot tell. Both ends' kernels answer those without waiting for a
// process to be scheduled, so on a busy machine it is the link's round trip,
// where timing a request would add the wait for the peer's server and ours.
func kernelRTT(conn net.Conn) time.Duration {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	tcp, ok := conn.(*net.TCPConn)
	if !ok {
		return 0
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		return 0
	}
	var info *unix.TCPInfo
	raw.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	})
	if err != nil || info == nil || info.Min_rtt == 0 || info.Min_rtt == ^uint32(0) {
		return 0
	}
	return time.Duration(info.Min_rtt) * time.Microsecond
}
