package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/BurntSushi/toml"

	"shoal/internal/agent"
)

// deploy/agent.toml parses with the agent's parser, sets each key it sets to
// the value it gives, which is the agent's default as it says, and each key
// it shows in a comment parses too.
func TestDeployAgentConfig(t *testing.T) {
	data, err := os.ReadFile("../../deploy/agent.toml")
	if err != nil {
		t.Fatal(err)
	}
	fs, o := agentFlags()
	if err := applyAgentConfig(fs, o, "deploy/agent.toml", data, nil); err != nil {
		t.Fatalf("deploy/agent.toml: %v", err)
	}
	var says map[string]any
	if _, err := toml.Decode(string(data), &says); err != nil {
		t.Fatal(err)
	}
	if len(says) == 0 {
		t.Fatal("deploy/agent.toml sets nothing")
	}
	for key, v := range says {
		f := fs.Lookup(key)
		want := f.DefValue
		if key == "data-dir" {
			want = agent.RootDataDir // the default for root
		}
		check, _ := agentFlags()
		if err := check.Set(key, fmt.Sprint(v)); err != nil {
			t.Errorf("%s = %v: %v", key, v, err)
			continue
		}
		if got := f.Value.String(); got != check.Lookup(key).Value.String() || got != want {
			t.Errorf("%s = %v in the file: the flag is %q, want %q (the file's value, the agent's default)", key, v, got, want)
		}
	}

	commented := regexp.MustCompile(`(?m)^#([a-z-]+ = .*)$`)
	shown := commented.FindAllSubmatch(data, -1)
	if len(shown) == 0 {
		t.Fatal("deploy/agent.toml shows no key in a comment")
	}
	for _, m := range shown {
		fs, o := agentFlags()
		if err := applyAgentConfig(fs, o, "deploy/agent.toml", m[1], nil); err != nil {
			t.Errorf("the commented line %q: %v", m[1], err)
		}
	}

	unit, err := os.ReadFile("../../deploy/shoal-agent.service")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(unit, []byte("ExecStart=/usr/local/bin/shoal agent --config /etc/shoal/agent.toml\n")) ||
		!bytes.Contains(data, []byte("/etc/shoal/agent.toml")) {
		t.Errorf("deploy/shoal-agent.service does not start the agent with --config /etc/shoal/agent.toml, the file deploy/agent.toml says it is")
	}
}
