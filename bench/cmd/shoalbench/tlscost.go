package main

// shoalbench tlscost measures the CPU time of moving bytes over one TCP
// connection between two hosts: plain, and over TLS 1.3 as the agents speak it
// (crypto/tls, the cluster's certificates) with the sender's writes as they
// come or gathered under TLS into larger socket writes. bench/tls-cost runs a
// receiver on one testbed host and the sender on another.
//
//	shoalbench tlscost -listen ADDR -secret FILE          receive, forever
//	shoalbench tlscost -send ADDR -secret FILE -mb N      send each way once, print
//	                                                      a line per way: name, sender
//	                                                      and receiver CPU-s, key

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"

	"shoal/internal/agent"
	"shoal/internal/pki"
)

// A way of sending: TLS or not, the size of each write of the sender, and
// how much is gathered under TLS before a socket write (0: none).
type way struct {
	Name string
	// Key names the way in the bench's RESULT line.
	Key    string `json:"-"`
	TLS    bool
	Write  int
	Gather int
	// ReadGather is how much the receiver reads from the socket at a time
	// under TLS (0: what TLS asks for, about 32 KiB).
	ReadGather int
	Bytes      int64 `json:",omitempty"` // set by the sender
}

var ways = []way{
	{Name: "tcp, 1 MiB writes", Key: "tcp", Write: 1 << 20},
	{Name: "tls, 4 KiB writes", Key: "tls_4k", TLS: true, Write: 4 << 10},
	{Name: "tls, 1 MiB writes", Key: "tls_1m", TLS: true, Write: 1 << 20},
	{Name: "tls, 1 MiB writes gathered into 256 KiB", Key: "tls_gathered", TLS: true, Write: 1 << 20, Gather: 256 << 10},
	{Name: "tls, gathered, read 256 KiB at a time", Key: "tls_gathered_read", TLS: true, Write: 1 << 20, Gather: 256 << 10, ReadGather: 256 << 10},
}

// cpu is this process's CPU time so far, in seconds.
func cpu() float64 {
	var r syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return float64(r.Utime.Nano()+r.Stime.Nano()) / 1e9
}

func tlsCostMain(args []string) int {
	fs := flag.NewFlagSet("tlscost", flag.ContinueOnError)
	listen := fs.String("listen", "", "receive on this address")
	send := fs.String("send", "", "send to the receiver at this address")
	secretFile := fs.String("secret", "", "the cluster secret's file")
	mb := fs.Int("mb", 256, "MB sent each way")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	secret, err := agent.ReadSecret(*secretFile)
	if err != nil {
		return tlsCostFail(err)
	}
	switch {
	case *listen != "":
		id, err := pki.NewIdentity(secret, "receiver", net.ParseIP("127.0.0.1"))
		if err != nil {
			return tlsCostFail(err)
		}
		return tlsCostFail(receive(*listen, id.ServerConfig()))
	case *send != "":
		id, err := pki.ClientIdentity(secret, "sender")
		if err != nil {
			return tlsCostFail(err)
		}
		for _, w := range ways {
			s, r, err := sendOnce(*send, id.ClientConfig(), w, int64(*mb)<<20)
			if err != nil {
				return tlsCostFail(err)
			}
			fmt.Printf("%s\t%.3f\t%.3f\t%s\n", w.Name, s, r, w.Key)
		}
		return 0
	}
	fmt.Fprintln(os.Stderr, "tlscost: want -listen or -send")
	return 2
}

// tlsCostFail prints err and returns the exit code of a failure.
func tlsCostFail(err error) int {
	fmt.Fprintln(os.Stderr, "tlscost:", err)
	return 1
}

// receive answers each connection: 512 bytes of JSON naming the way and the
// bytes to come, then those bytes; it answers with its CPU time spent.
func receive(addr string, cfg *tls.Config) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		var w way
		if err := json.NewDecoder(io.LimitReader(c, 512)).Decode(&w); err != nil {
			c.Close()
			continue
		}
		// The way's line is read on the plain connection before any TLS.
		c.Write([]byte{'\n'})
		conn := c
		if w.TLS {
			under := c
			if w.ReadGather > 0 {
				under = &readBufferedConn{Conn: c, r: bufio.NewReaderSize(c, w.ReadGather)}
			}
			conn = tls.Server(under, cfg)
		}
		start := cpu()
		io.CopyBuffer(io.Discard, io.LimitReader(conn, w.Bytes), make([]byte, 1<<20))
		fmt.Fprintf(conn, "%f\n", cpu()-start)
		conn.Close()
	}
}

// sendOnce sends n bytes the way w and returns the sender's CPU seconds and
// the receiver's.
func sendOnce(addr string, cfg *tls.Config, w way, n int64) (float64, float64, error) {
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, 0, err
	}
	defer raw.Close()
	w.Bytes = n
	line, _ := json.Marshal(w)
	// Padded to 512 bytes so the receiver's limited decoder reads no byte of what follows.
	raw.Write(append(line, make([]byte, 512-len(line))...))
	var ack [1]byte
	if _, err := io.ReadFull(raw, ack[:]); err != nil {
		return 0, 0, err
	}
	var gathered *bufio.Writer
	conn := net.Conn(raw)
	if w.TLS {
		bc := &bufferedConn{Conn: raw}
		tc := tls.Client(bc, cfg)
		if err := tc.Handshake(); err != nil {
			return 0, 0, err
		}
		if w.Gather > 0 {
			gathered = bufio.NewWriterSize(raw, w.Gather)
			bc.w = gathered
		}
		conn = tc
	}
	buf := make([]byte, w.Write)
	start := cpu()
	for left := n; left > 0; left -= int64(len(buf)) {
		if _, err := conn.Write(buf[:min(int64(len(buf)), left)]); err != nil {
			return 0, 0, err
		}
		if gathered != nil {
			gathered.Flush()
		}
	}
	sent := cpu() - start
	// No close_notify: crypto/tls sets the connection's write deadline to now
	// once it has written one, so a gathered one would never leave.
	var got float64
	if _, err := fmt.Fscan(conn, &got); err != nil {
		return 0, 0, fmt.Errorf("the receiver's answer: %w", err)
	}
	return sent, got, nil
}

// bufferedConn writes through w once it is set (after the handshake): the
// records of one TLS write are gathered until the sender flushes.
type bufferedConn struct {
	net.Conn
	w *bufio.Writer
}

func (b *bufferedConn) Write(p []byte) (int, error) {
	if b.w == nil {
		return b.Conn.Write(p)
	}
	return b.w.Write(p)
}

// readBufferedConn reads through r: under TLS, one socket read serves many
// records.
type readBufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *readBufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }
