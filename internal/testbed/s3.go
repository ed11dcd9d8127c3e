package testbed

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// SeaweedFS is the S3-compatible server of the tests and of `shoal testbed s3`: a
// separate program (Apache-2.0) that Shoal runs and never links. scripts/seaweedfs.sh
// (make s3-server) builds this version from the Go module proxy into
// DefaultSeaweedFSCache/VERSION/weed.
const (
	SeaweedFSVersion      = "v0.0.0-20261109003541-7506e5f91cd6"
	DefaultSeaweedFSCache = "/var/cache/shoal/seaweedfs"
)

// WeedPath is where make s3-server puts weed.
func WeedPath() string {
	return filepath.Join(DefaultSeaweedFSCache, SeaweedFSVersion, "weed")
}

// S3Region is the region the server's settings name; SeaweedFS takes any.
const S3Region = "us-east-1"

// S3Config is one S3 server to start.
type S3Config struct {
	Weed string // the weed executable
	Dir  string // its data, credentials, logs and settings; created
	// BindIP is where the S3 port listens: 127.0.0.1, or 0.0.0.0 to be reached from
	// testbed hosts at their bridge's address. SeaweedFS's own master, volume and
	// filer servers, which take no credentials, listen on the loopback address only.
	BindIP string
	Port   int    // the S3 port; 0 takes a free one
	Bucket string // a bucket made once the server answers; "" for none
	// Detach: the server outlives this process (shoal testbed s3 up), in a session
	// of its own; [StopS3] stops it by the pids in its settings.
	Detach bool
}

// S3Server is a running S3 server, as its settings file (Dir/settings.json) holds it.
type S3Server struct {
	Dir string `json:"dir"`
	// Host is where this machine reaches the S3 port: the address it listens on, or
	// the loopback address when that is every address.
	Host      string `json:"host"`
	Port      int    `json:"port"`
	Bucket    string `json:"bucket,omitempty"`
	AccessKey string `json:"access_key"`
	SecretKey string `json:"secret_key"`
	Region    string `json:"region"`
	PIDs      []int  `json:"pids"` // one process group each: weed mini, weed s3

	procs []*os.Process // when not detached
}

// Endpoint is the server's URL for a client reaching it at host.
func (s *S3Server) Endpoint(host string) string {
	return "http://" + net.JoinHostPort(host, strconv.Itoa(s.Port))
}

// Env is the server's settings as the AWS environment variables a client at host
// reads: sh exports, one a line.
func (s *S3Server) Env(host string) string {
	var b strings.Builder
	for _, kv := range s.EnvVars(host) {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "export %s='%s'\n", k, v)
	}
	return b.String()
}

// EnvVars is [S3Server.Env] as KEY=VALUE pairs, for a child's environment.
func (s *S3Server) EnvVars(host string) []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=" + s.Region,
		"AWS_ENDPOINT_URL_S3=" + s.Endpoint(host),
	}
}

// StartS3 starts SeaweedFS as cfg says, with a fresh access key and secret, and
// returns once its S3 port answers with them and the bucket exists (within ctx).
func StartS3(ctx context.Context, cfg S3Config) (*S3Server, error) {
	if _, err := os.Stat(cfg.Weed); err != nil {
		return nil, fmt.Errorf("testbed: s3: %v (make s3-server builds it)", err)
	}
	data := filepath.Join(cfg.Dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	host := cfg.BindIP
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	s := &S3Server{Dir: cfg.Dir, Host: host, Bucket: cfg.Bucket, Region: S3Region,
		AccessKey: randomKey(20, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
		SecretKey: randomKey(40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")}
	conf, err := json.Marshal(map[string]any{"identities": []any{map[string]any{
		"name":        "shoal",
		"credentials": []any{map[string]string{"accessKey": s.AccessKey, "secretKey": s.SecretKey}},
		"actions":     []string{"Admin", "Read", "List", "Tagging", "Write"},
	}}})
	if err != nil {
		return nil, err
	}
	s3conf := filepath.Join(cfg.Dir, "s3.json")
	if err := os.WriteFile(s3conf, conf, 0o600); err != nil {
		return nil, err
	}
	// Every port weed opens is named, each a free one: its defaults (9333, 8888, …)
	// may be taken on a shared machine, and gRPC ports otherwise follow as +10000.
	ports, err := freePorts(9)
	if err != nil {
		return nil, err
	}
	master, masterGRPC, volume, volumeGRPC, filer, filerGRPC, s3GRPC, admin, adminGRPC := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5], ports[6], ports[7], ports[8]
	s.Port = cfg.Port
	if s.Port == 0 {
		p, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		s.Port = p[0]
	}
	loop := "127.0.0.1"
	mini := []string{"mini", "-dir=" + data, "-ip=" + loop, "-ip.bind=" + loop,
		"-s3=false", "-webdav=false", "-admin.ui=false", "-master.telemetry=false",
		"-master.port=" + strconv.Itoa(master), "-master.port.grpc=" + strconv.Itoa(masterGRPC),
		"-volume.port=" + strconv.Itoa(volume), "-volume.port.grpc=" + strconv.Itoa(volumeGRPC),
		"-filer.port=" + strconv.Itoa(filer), "-filer.port.grpc=" + strconv.Itoa(filerGRPC),
		"-admin.port=" + strconv.Itoa(admin), "-admin.port.grpc=" + strconv.Itoa(adminGRPC), "-admin.port.legacy=0",
		"-filer.localSocket=" + filepath.Join(cfg.Dir, "filer.sock")}
	// SeaweedFS writes a server's address with its gRPC port as HOST:PORT.GRPC.
	s3 := []string{"s3", "-filer=" + fmt.Sprintf("%s:%d.%d", loop, filer, filerGRPC), "-ip=" + loop,
		"-ip.bind=" + cfg.BindIP, "-port=" + strconv.Itoa(s.Port), "-port.grpc=" + strconv.Itoa(s3GRPC),
		"-port.iceberg=0", "-port.lance=0", "-config=" + s3conf,
		"-localSocket=" + filepath.Join(cfg.Dir, "s3.sock")}
	for _, args := range [][]string{mini, s3} {
		p, err := startWeed(cfg, args)
		if err != nil {
			s.Stop()
			return nil, err
		}
		s.PIDs = append(s.PIDs, p.Pid)
		if cfg.Detach {
			p.Release()
		} else {
			s.procs = append(s.procs, p)
		}
	}
	if err := s.writeSettings(); err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// startWeed starts weed with args in its own process group (a session of its own
// when detached), its output to Dir/weed-SUBCOMMAND.log.
func startWeed(cfg S3Config, args []string) (*os.Process, error) {
	log, err := os.OpenFile(filepath.Join(cfg.Dir, "weed-"+args[0]+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(cfg.Weed, args...)
	cmd.Dir = cfg.Dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: !cfg.Detach, Setsid: cfg.Detach}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("testbed: s3: start weed %s: %w", args[0], err)
	}
	if !cfg.Detach {
		// Reaped by Stop; a goroutine would race with it for the status.
		return cmd.Process, nil
	}
	go cmd.Wait()
	return cmd.Process, nil
}

// Client is a client of the server from this machine, with its credentials.
func (s *S3Server) Client() (*minio.Client, error) {
	return minio.New(net.JoinHostPort(s.Host, strconv.Itoa(s.Port)), &minio.Options{
		Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: s.Region})
}

// waitReady waits until the S3 port answers with the server's credentials, then
// makes the bucket.
func (s *S3Server) waitReady(ctx context.Context) error {
	c, err := s.Client()
	if err != nil {
		return err
	}
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, last = c.ListBuckets(cctx)
		cancel()
		if last == nil {
			break
		}
		if !s.running() {
			return fmt.Errorf("testbed: s3: weed exited (see %s/weed-*.log): %v", s.Dir, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testbed: s3: no answer on port %d: %v (see %s/weed-*.log)", s.Port, last, s.Dir)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if s.Bucket == "" {
		return nil
	}
	for {
		err := c.MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{Region: s.Region})
		if resp := minio.ToErrorResponse(err); err == nil || resp.Code == "BucketAlreadyOwnedByYou" || resp.Code == "BucketAlreadyExists" {
			return nil
		}
		// The filer may still be finding its volume server.
		select {
		case <-ctx.Done():
			return fmt.Errorf("testbed: s3: make bucket %s: %v", s.Bucket, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// running reports whether every one of the server's processes is alive.
func (s *S3Server) running() bool {
	for _, pid := range s.PIDs {
		if syscall.Kill(pid, 0) != nil {
			return false
		}
		// A child not reaped yet is a zombie: exited.
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || strings.Contains(string(b), ") Z ") {
			return false
		}
	}
	return len(s.PIDs) > 0
}

// Stop stops the server's processes (their process groups), SIGTERM then, after 5
// s, SIGKILL. Its files stay.
func (s *S3Server) Stop() {
	// A pid from the settings of a server long gone may be another program's now.
	var pids []int
	for _, pid := range s.PIDs {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && filepath.Base(strings.TrimSuffix(exe, " (deleted)")) == "weed" {
			pids = append(pids, pid)
			syscall.Kill(-pid, syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(-pid, 0) == nil && time.Now().Before(deadline) && !zombie(pid) {
			time.Sleep(50 * time.Millisecond)
		}
		syscall.Kill(-pid, syscall.SIGKILL)
	}
	for _, p := range s.procs {
		p.Wait()
	}
	s.procs = nil
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err != nil || strings.Contains(string(b), ") Z ")
}

func (s *S3Server) writeSettings() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.Dir, "settings.json"), b, 0o600)
}

// freePorts returns n distinct TCP ports free on the loopback address now.
func freePorts(n int) ([]int, error) {
	var out []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// randomKey returns n characters of alphabet, chosen by crypto/rand.
func randomKey(n int, alphabet string) string {
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// The testbed's S3 server: one per machine, outside every host, its S3 port on every
// address of this machine (0.0.0.0) so that the hosts of every instance reach it at
// their bridge's address.
const (
	TestbedS3Dir    = "/tmp/shoal-testbed-s3"
	TestbedS3Port   = 8333
	TestbedS3Bucket = "shoal"
)

// ErrS3NotUp: shoal testbed s3 up has not run, or down has since.
var ErrS3NotUp = errors.New("testbed: s3: not up")

// OpenS3 returns the testbed's S3 server from its settings, [ErrS3NotUp] when there
// are none.
func OpenS3() (*S3Server, error) {
	if err := checkS3Dir(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(TestbedS3Dir, "settings.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrS3NotUp
	}
	if err != nil {
		return nil, err
	}
	var s S3Server
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("testbed: s3: %s: %v", filepath.Join(TestbedS3Dir, "settings.json"), err)
	}
	if s.Host == "" {
		s.Host = "127.0.0.1"
	}
	return &s, nil
}

// S3Up starts the testbed's S3 server, unless it runs already and answers, and writes
// its settings for this machine to TestbedS3Dir/env. It returns the server.
func S3Up(ctx context.Context, weed string) (*S3Server, error) {
	if s, err := OpenS3(); err == nil && s.running() {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.waitReady(wctx)
		cancel()
		if err == nil {
			return s, s.writeEnv()
		}
	}
	if err := S3Down(); err != nil {
		return nil, err
	}
	// Made here, after S3Down removed what was there: a directory another user
	// made in /tmp first (or a link) fails here rather than be written by root.
	if err := os.Mkdir(TestbedS3Dir, 0o700); err != nil {
		return nil, fmt.Errorf("testbed: s3: %w", err)
	}
	if err := checkS3Dir(); err != nil {
		return nil, err
	}
	s, err := StartS3(ctx, S3Config{Weed: weed, Dir: TestbedS3Dir, BindIP: "0.0.0.0", Port: TestbedS3Port, Bucket: TestbedS3Bucket, Detach: true})
	if err != nil {
		return nil, err
	}
	return s, s.writeEnv()
}

// checkS3Dir checks that TestbedS3Dir, when it exists, is a directory only root
// can change ([checkRootDir]): root reads the pids it stops there and writes
// credentials there.
func checkS3Dir() error {
	if err := checkRootDir(TestbedS3Dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("testbed: s3: %w", err)
	}
	return nil
}

func (s *S3Server) writeEnv() error {
	return os.WriteFile(filepath.Join(s.Dir, "env"), []byte(s.Env(s.Host)), 0o600)
}

// S3Down stops the testbed's S3 server and removes its data; nothing up is no error.
func S3Down() error {
	if s, err := OpenS3(); err == nil {
		s.Stop()
	}
	return os.RemoveAll(TestbedS3Dir)
}

// writeS3Env writes the settings of the S3 server s (nil: the testbed's) for the
// hosts of instance n, the endpoint at its bridge address, to n's s3.env
// (Config.S3).
func writeS3Env(n names, s *S3Server) error {
	if s == nil {
		var err error
		if s, err = OpenS3(); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(n.s3EnvFile(), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("testbed: s3: %w", err)
	}
	_, err = f.WriteString(s.Env(n.bridgeIP()))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// BridgeIP is this machine's address on instance's bridge, where its hosts reach
// what runs outside them (the S3 server).
func BridgeIP(instance int) string { return names{inst: instance}.bridgeIP() }
