//go:build !linux

package api

import (
	"net"
	"time"
)

// kernelRTT is 0 where the kernel's TCP round trip is not read.
func kernelRTT(net.Conn) time.Duration { return 0 }
