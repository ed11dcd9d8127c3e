package testbed

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

// delayLine decides what one direction of a host's link does to each frame: drop it
// (with probability loss), or release it at its arrival plus delay ± jitter (uniform),
// but never before the frame ahead of it, so that a direction's frames keep their order
// as they would on one radio link. Under a stream of frames their delays so bunch
// towards the upper end, as frames queued behind a slow one do on a real Wi-Fi. It is
// the pure part of the delay line; not safe for concurrent use.
type delayLine struct {
	delay, jitter time.Duration
	loss          float64
	rand          func() float64 // uniform in [0, 1)
	last          time.Time      // release time of the frame ahead
}

// admit decides the frame arriving at now: kept and released at release, or dropped.
func (l *delayLine) admit(now time.Time) (release time.Time, kept bool) {
	if l.loss > 0 && l.rand() < l.loss {
		return time.Time{}, false
	}
	d := l.delay
	if l.jitter > 0 {
		d += time.Duration((2*l.rand() - 1) * float64(l.jitter))
	}
	release = now.Add(max(d, 0))
	if release.Before(l.last) {
		release = l.last
	}
	l.last = release
	return release, true
}

// LinkConfig is what [RunLink] needs: the host, and the profile's figures.
type LinkConfig struct {
	Instance, Host int // the host nK of the instance
	Delay, Jitter  time.Duration
	Loss           float64
}

// hostTap is the name the host's end of its delay line has until it becomes the host's
// eth0 in its namespace.
func (n names) hostTap(k int) string { return n.netns(k) + "h" }

// linkMarker names a host's delay line in its argv, as wakerMarker does its waker.
func (n names) linkMarker(k int) string { return fmt.Sprintf("shoal-testbed-%d-n%d-link", n.inst, k) }

// queueFrames is how many frames a direction holds at most; more are dropped, as a full
// queue drops them.
const queueFrames = 4096

// RunLink is the delay line of host cfg.Host (`shoal testbed delay-line`, which [Up] and
// [Bed.Add] start in its own session for a host with a [Profile]): it opens two TAP
// devices, shoalI-nK (the testbed then makes it a port of the bridge) and shoalI-nKh
// (moved into the host's namespace as its eth0), and copies each frame from one to the
// other as a [delayLine] decides. It returns when ctx ends; its devices go with it.
func RunLink(ctx context.Context, cfg LinkConfig) error {
	n := names{cfg.Instance}
	bridgeSide, err := openTap(n.netns(cfg.Host))
	if err != nil {
		return err
	}
	defer bridgeSide.Close()
	hostSide, err := openTap(n.hostTap(cfg.Host))
	if err != nil {
		return err
	}
	defer hostSide.Close()
	errs := make(chan error, 2)
	for _, dir := range [][2]*os.File{{hostSide, bridgeSide}, {bridgeSide, hostSide}} {
		l := &delayLine{delay: cfg.Delay, jitter: cfg.Jitter, loss: cfg.Loss, rand: rand.Float64}
		go func() { errs <- pump(dir[0], dir[1], l) }()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return err
	}
}

type frame struct {
	b       []byte
	release time.Time
}

// pump reads frames from src and writes each to dst at its release time.
func pump(src, dst *os.File, l *delayLine) error {
	queue := make(chan frame, queueFrames)
	go func() {
		for f := range queue {
			if d := time.Until(f.release); d > 0 {
				time.Sleep(d)
			}
			// A link taken down (cut) refuses frames: they are lost, as on the air.
			dst.Write(f.b)
		}
	}()
	defer close(queue)
	buf := make([]byte, 65536)
	for {
		k, err := src.Read(buf)
		if err != nil {
			if errors.Is(err, syscall.EINTR) || errors.Is(err, syscall.EAGAIN) {
				continue
			}
			return fmt.Errorf("testbed: delay line: read %s: %w", src.Name(), err)
		}
		release, kept := l.admit(time.Now())
		if !kept {
			continue
		}
		select {
		case queue <- frame{append([]byte(nil), buf[:k]...), release}:
		default:
		}
	}
}

// openTap creates the TAP device name (frames without a packet-information header),
// which lives as long as the returned file stays open.
func openTap(name string) (*os.File, error) {
	fd, err := syscall.Open("/dev/net/tun", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("testbed: open /dev/net/tun: %w", err)
	}
	const (
		tunSetIff = 0x400454ca
		iffTap    = 0x0002
		iffNoPI   = 0x1000
	)
	var req struct {
		name  [16]byte
		flags uint16
		_     [22]byte
	}
	copy(req.name[:15], name)
	req.flags = iffTap | iffNoPI
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), tunSetIff, uintptr(unsafe.Pointer(&req))); e != 0 {
		syscall.Close(fd)
		return nil, fmt.Errorf("testbed: make TAP device %s: %w", name, e)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// startLink starts host k's delay line for profile p in its own session, in the
// machine's network namespace, and waits until both its devices exist.
func (n names) startLink(ctx context.Context, bin string, k int, p Profile) (int, error) {
	if bin == "" {
		return 0, fmt.Errorf("%w: profile %s needs the shoal executable for its delay line (Config.LinkBinary or AgentBinary)", ErrInvalidConfig, p.Name)
	}
	argv := []string{bin, "testbed", "delay-line", "--instance", strconv.Itoa(n.inst), "--node", strconv.Itoa(k),
		"--delay", p.Delay.String(), "--jitter", p.Jitter.String(), "--loss", strconv.FormatFloat(p.Loss, 'g', -1, 64),
		"--marker", n.linkMarker(k)}
	if mn := n.machineNetns(); mn != "" {
		argv = append([]string{"nsenter", "--net=" + mn, "--"}, argv...)
	}
	logPath := filepath.Join(n.hostDir(k), "link.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("testbed: start the delay line of n%d: %w", k, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(5 * time.Second)
	for !n.linkExists(ctx, n.netns(k)) || !n.linkExists(ctx, n.hostTap(k)) {
		select {
		case <-exited:
			return 0, fmt.Errorf("testbed: the delay line of n%d exited; %s:\n%s", k, logPath, tail(logPath, 5))
		default:
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("testbed: the delay line of n%d made no devices in 5 s; %s:\n%s", k, logPath, tail(logPath, 5))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd.Process.Pid, nil
}
