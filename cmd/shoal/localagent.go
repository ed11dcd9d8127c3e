package main

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"shoal/internal/agent"
	"shoal/internal/api"
	"shoal/internal/errkind"
)

// localAgentFlags are the flags of the commands that talk to an agent (nodes,
// leave). Without them the command finds the local agent through its data dir:
// DATA-DIR/agent.addr and DATA-DIR/secret.
type localAgentFlags struct {
	dataDir    string
	addr       string
	secretFile string
}

func (f *localAgentFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dataDir, "data-dir", "", "data dir of the local agent (default: $SHOAL_DATA_DIR, else /var/lib/shoal for root, ~/.shoal for others)")
	fs.StringVar(&f.addr, "agent", "", "API address HOST:PORT of the agent to ask (default: $SHOAL_AGENT, else the local agent's)")
	fs.StringVar(&f.secretFile, "secret-file", "", "cluster secret file (default: the copy in the data dir)")
}

// client returns a client of the agent the flags designate.
func (f *localAgentFlags) client() (*api.Client, error) {
	c, _, err := f.clientSecret()
	return c, err
}

// clientSecret is client and the cluster secret it signs with: nil for a client of
// the agent's local socket, for a user who cannot read the secret.
func (f *localAgentFlags) clientSecret() (*api.Client, []byte, error) {
	addr := f.addr
	if addr == "" {
		addr = os.Getenv("SHOAL_AGENT")
	}
	dir := f.dataDir
	if dir == "" {
		dir = agent.DefaultDataDir()
	}
	if addr == "" && f.secretFile == "" {
		// A user who cannot read the secret talks to the local agent through
		// its socket, as themself: the agent's own data dir, or root's.
		if sock := localSocket(dir, f.dataDir == "" && os.Getenv("SHOAL_DATA_DIR") == ""); sock != "" {
			return api.NewLocalClient(sock), nil, nil
		}
	}
	var secret []byte
	var err error
	if f.secretFile != "" {
		if secret, err = agent.ReadSecret(f.secretFile); err != nil {
			return nil, nil, err
		}
	}
	if addr == "" {
		a, s, err := agent.FindLocal(dir)
		if err != nil && !(secret != nil && errors.Is(err, agent.ErrNoSecret)) {
			return nil, nil, err
		}
		addr = a
		if secret == nil {
			secret = s
		}
	} else if secret == nil {
		if secret, err = agent.ReadSecret(filepath.Join(dir, agent.SecretFile)); err != nil {
			return nil, nil, err
		}
	}
	return api.NewClient(addr, secret), secret, nil
}

// errorLine turns an error into the one line a command prints after its name.
// An agent's answer is its reason alone ([api.Error.Reason]): the exit code,
// not the words "conflict" or "not found", tells the kind.
func errorLine(err error) string {
	msg := err.Error()
	var ae *api.Error
	if errors.As(err, &ae) && ae.Status == 401 {
		msg = "the agent refused the request: " + strings.Replace(msg, ae.Message, ae.Reason(), 1)
	} else if ae != nil {
		msg = strings.Replace(msg, ae.Message, ae.Reason(), 1)
	} else if errors.Is(err, errkind.Unauthorized) { // refused in the TLS handshake
		msg = strings.TrimPrefix(msg, "api: unauthorized: ")
	}
	if errors.Is(err, errkind.Unreachable) {
		msg += " (is the agent running?)"
	}
	for _, p := range []string{"api: ", "agent: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return strings.ReplaceAll(msg, "\n", "; ")
}

// localSocket returns the socket of the agent of data dir dir when the caller
// cannot read its secret (a user other than the agent's), or "" to use the
// secret. With orRoot, a user with no agent of their own in dir is sent to the
// socket of root's agent (/var/lib/shoal), the usual one on a shared node.
func localSocket(dir string, orRoot bool) string {
	usable := func(dir string) string {
		sock := filepath.Join(dir, agent.SocketFile)
		if _, err := os.Stat(sock); err != nil {
			return ""
		}
		if unix.Access(filepath.Join(dir, agent.SecretFile), unix.R_OK) == nil {
			return "" // the secret is readable: the caller acts for the cluster
		}
		return sock
	}
	if sock := usable(dir); sock != "" {
		return sock
	}
	if _, err := os.Stat(filepath.Join(dir, agent.AddrFile)); err == nil || !orRoot {
		return ""
	}
	return usable(agent.RootDataDir)
}
