package overlay

import (
	"fmt"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// Device is a TUN device: each Read returns one IP packet the kernel routed to
// it, each Write hands one to the kernel as if it had arrived on it. Read and
// Write may be called concurrently with each other; Close ends a blocked Read.
type Device struct {
	f    *os.File
	name string
}

// OpenDevice creates the TUN device name (IFF_TUN, no packet information
// header: Read and Write carry bare IP packets), gives it addr with prefix's
// length (so that the kernel routes the whole prefix to it), [MTU], and brings
// it up. It needs CAP_NET_ADMIN. The device goes away when it is closed.
func OpenDevice(name string, addr netip.Addr, prefix netip.Prefix) (*Device, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("overlay: open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("overlay: device name %q: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("overlay: create device %s: %w", name, err)
	}
	// Non-blocking, so that the runtime's poller waits for packets and Close
	// ends a Read.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("overlay: device %s: %w", name, err)
	}
	d := &Device{f: os.NewFile(uintptr(fd), "/dev/net/tun"), name: name}
	if err := d.SetAddr(addr, prefix); err != nil {
		d.Close()
		return nil, err
	}
	if err := d.up(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Name is the device's name.
func (d *Device) Name() string { return d.name }

// Read reads one packet into b.
func (d *Device) Read(b []byte) (int, error) { return d.f.Read(b) }

// Write writes one packet.
func (d *Device) Write(b []byte) (int, error) { return d.f.Write(b) }

// Close removes the device.
func (d *Device) Close() error { return d.f.Close() }

// SetAddr gives the device addr, with prefix's length as its netmask, in
// place of the address it had.
func (d *Device) SetAddr(addr netip.Addr, prefix netip.Prefix) error {
	if !addr.Is4() || !prefix.Addr().Is4() {
		return fmt.Errorf("overlay: device %s: address %v in %v: want IPv4", d.name, addr, prefix)
	}
	mask := netip.AddrFrom4([4]byte(net4Mask(prefix.Bits())))
	return d.ioctls(func(s int) error {
		for _, set := range []struct {
			req  uint
			addr netip.Addr
			what string
		}{{unix.SIOCSIFADDR, addr, "address"}, {unix.SIOCSIFNETMASK, mask, "netmask"}} {
			ifr, err := unix.NewIfreq(d.name)
			if err != nil {
				return err
			}
			a := set.addr.As4()
			if err := ifr.SetInet4Addr(a[:]); err != nil {
				return err
			}
			if err := unix.IoctlIfreq(s, set.req, ifr); err != nil {
				return fmt.Errorf("overlay: device %s: set %s %v: %w", d.name, set.what, set.addr, err)
			}
		}
		return nil
	})
}

// up sets the device's MTU and brings it up.
func (d *Device) up() error {
	return d.ioctls(func(s int) error {
		ifr, err := unix.NewIfreq(d.name)
		if err != nil {
			return err
		}
		ifr.SetUint32(MTU)
		if err := unix.IoctlIfreq(s, unix.SIOCSIFMTU, ifr); err != nil {
			return fmt.Errorf("overlay: device %s: set MTU %d: %w", d.name, MTU, err)
		}
		if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
			return fmt.Errorf("overlay: device %s: flags: %w", d.name, err)
		}
		ifr.SetUint16(ifr.Uint16() | unix.IFF_UP | unix.IFF_RUNNING)
		if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
			return fmt.Errorf("overlay: device %s: bring up: %w", d.name, err)
		}
		return nil
	})
}

// ioctls runs f with a socket for the interface ioctls.
func (d *Device) ioctls(f func(s int) error) error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("overlay: device %s: %w", d.name, err)
	}
	defer unix.Close(s)
	return f(s)
}

func net4Mask(bits int) []byte {
	m := uint32(0xffffffff) << (32 - bits)
	return []byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}
}
