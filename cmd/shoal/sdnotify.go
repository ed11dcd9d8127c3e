package main

import (
	"net"
	"os"
)

// notifier tells systemd how the agent is doing when it runs under a
// Type=notify unit, through the datagram socket systemd names in
// $NOTIFY_SOCKET (sd_notify(3)); with no such socket it does nothing.
type notifier struct {
	socket string
}

// takeNotifier returns the notifier of $NOTIFY_SOCKET and removes the
// variable from the environment, so that the ranks the agent starts do not
// inherit it.
func takeNotifier() notifier {
	n := notifier{socket: os.Getenv("NOTIFY_SOCKET")}
	os.Unsetenv("NOTIFY_SOCKET")
	return n
}

// notify sends state, such as "READY=1"; the name of an abstract socket
// starts with '@', which package net understands.
func (n notifier) notify(state string) error {
	if n.socket == "" {
		return nil
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: n.socket, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}
