package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"shoal/internal/agent"
	"shoal/internal/api"
	"shoal/internal/ui"
)

func init() {
	register("ui", command{summary: "serve a live web dashboard of the cluster on this machine", run: uiCmd})
}

const uiUsage = `Usage: shoal ui [flags]

Serves a live, read-only web dashboard of the cluster on this machine: its
nodes and links, the jobs, and each job's events as they happen, where its
ranks run, a timeline of its progress with its checkpoints, losses, restarts
and moves, and a farm's tasks (docs/ui.md).

The dashboard reads the local agent through its socket as the user who runs
shoal ui: a user sees their own jobs, root every job. It listens on loopback
only and prints the address to open, with a random token that every other
local user lacks; it runs until interrupted.

Flags:
`

func uiCmd(args []string, stdout, stderr io.Writer) int {
	var listen, dataDir string
	fs := flag.NewFlagSet("ui", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&listen, "listen", "127.0.0.1:0", "loopback address HOST:PORT to serve on (port 0: any free port)")
	fs.StringVar(&dataDir, "data-dir", "", "data dir of the local agent, whose agent.sock is read (default: $SHOAL_DATA_DIR, else /var/lib/shoal for root, else ~/.shoal, else /var/lib/shoal)")
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, uiUsage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "shoal ui: %v (see 'shoal ui --help')\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "shoal ui: unexpected argument %q (see 'shoal ui --help')\n", fs.Arg(0))
		return exitUsage
	}
	if err := ui.CheckListen(listen); err != nil {
		fmt.Fprintf(stderr, "shoal ui: %s\n", errorLine(err))
		return exitUsage
	}
	sock, err := uiSocket(dataDir)
	if err != nil {
		fmt.Fprintf(stderr, "shoal ui: %s\n", err)
		return exitFailure
	}
	c := api.NewLocalClient(sock)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err = c.Health(ctx)
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "shoal ui: the agent at %s: %s\n", sock, errorLine(err))
		return exitFailure
	}
	token, err := ui.NewToken()
	if err != nil {
		fmt.Fprintf(stderr, "shoal ui: %v\n", err)
		return exitFailure
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintf(stderr, "shoal ui: %v\n", err)
		return exitFailure
	}
	addr := l.Addr().(*net.TCPAddr)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := &http.Server{Handler: ui.New(ui.ClientSource{Client: c}, token, addr, log), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "shoal ui: reading the agent at %s; open http://%s/?token=%s\n", sock, addr, token)
	sigs, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-sigs.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "shoal ui: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// uiSocket returns the local agent's socket: in dataDir when given, else in
// the default data dir, else in root's.
func uiSocket(dataDir string) (string, error) {
	dirs := []string{dataDir}
	if dataDir == "" {
		dirs = []string{agent.DefaultDataDir(), agent.RootDataDir}
	}
	for _, d := range dirs {
		sock := filepath.Join(d, agent.SocketFile)
		if _, err := os.Stat(sock); err == nil {
			return sock, nil
		}
	}
	return "", fmt.Errorf("no agent socket (%s) in %v: is an agent running on this machine? (--data-dir names its data dir)", agent.SocketFile, dirs)
}
