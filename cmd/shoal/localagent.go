package main

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"

	"shoal/internal/agent"
	"shoal/internal/api"
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
	addr := f.addr
	if addr == "" {
		addr = os.Getenv("SHOAL_AGENT")
	}
	dir := f.dataDir
	if dir == "" {
		dir = agent.DefaultDataDir()
	}
	var secret []byte
	var err error
	if f.secretFile != "" {
		if secret, err = agent.ReadSecret(f.secretFile); err != nil {
			return nil, err
		}
	}
	if addr == "" {
		a, s, err := agent.FindLocal(dir)
		if err != nil && !(secret != nil && errors.Is(err, agent.ErrNoSecret)) {
			return nil, err
		}
		addr = a
		if secret == nil {
			secret = s
		}
	} else if secret == nil {
		if secret, err = agent.ReadSecret(filepath.Join(dir, agent.SecretFile)); err != nil {
			return nil, err
		}
	}
	return api.NewClient(addr, secret), nil
}

// errorLine turns an error into the one line a command prints after its name.
func errorLine(err error) string {
	msg := err.Error()
	var ae *api.Error
	if errors.As(err, &ae) && ae.Status == 401 {
		msg = "the agent refused the request: " + strings.TrimPrefix(msg, "api: unauthorized: ")
	} else if errors.Is(err, api.ErrUnauthorized) { // refused in the TLS handshake
		msg = strings.TrimPrefix(msg, "api: unauthorized: ")
	}
	if errors.Is(err, api.ErrUnreachable) {
		msg += " (is the agent running?)"
	}
	for _, p := range []string{"api: ", "agent: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return strings.ReplaceAll(msg, "\n", "; ")
}
