package membership

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPresetsValidate(t *testing.T) {
	for _, name := range []string{"lan", "wifi", "local"} {
		c, err := Profile(name)
		if err != nil {
			t.Fatal(err)
		}
		c.Name = "n1"
		c.Secret = []byte("0123456789abcdef")
		if err := c.Validate(); err != nil {
			t.Errorf("profile %s: Validate() = %v, want nil", name, err)
		}
	}
	if _, err := Profile("lte"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Profile(lte) error = %v, want ErrInvalidConfig", err)
	}
	lan, wifi := DefaultLANConfig(), DefaultWiFiConfig()
	lanMin, _ := lan.SuspicionTimeout(3)
	wifiMin, _ := wifi.SuspicionTimeout(3)
	if wifi.ProbeTimeout <= lan.ProbeTimeout || wifi.IndirectChecks <= lan.IndirectChecks || wifiMin <= lanMin {
		t.Errorf("wifi preset is not more tolerant than lan: %+v vs %+v", wifi, lan)
	}
}

func TestValidate(t *testing.T) {
	base := DefaultLocalConfig()
	base.Name = "n1"
	base.Secret = []byte("0123456789abcdef")
	tests := []struct {
		change func(*Config)
		want   string // substring naming field and value
		is     error
	}{
		{func(c *Config) { c.Name = "" }, `Name ""`, ErrInvalidConfig},
		{func(c *Config) { c.Name = "a b" }, `Name "a b"`, ErrInvalidConfig},
		{func(c *Config) { c.Name = strings.Repeat("a", 64) }, "Name", ErrInvalidConfig},
		{func(c *Config) { c.BindAddr = "localhost" }, `BindAddr "localhost"`, ErrInvalidConfig},
		{func(c *Config) { c.BindPort = 70000 }, "BindPort 70000", ErrInvalidConfig},
		{func(c *Config) { c.AdvertiseAddr = "x" }, `AdvertiseAddr "x"`, ErrInvalidConfig},
		{func(c *Config) { c.Secret = []byte("short") }, "Secret has 5 bytes", ErrSecretTooShort},
		{func(c *Config) { c.ProbeInterval = 0 }, "ProbeInterval 0s", ErrInvalidConfig},
		{func(c *Config) { c.ProbeTimeout = time.Second }, "ProbeTimeout 1s", ErrInvalidConfig},
		{func(c *Config) { c.IndirectChecks = -1 }, "IndirectChecks -1", ErrInvalidConfig},
		{func(c *Config) { c.SuspicionMult = 0 }, "SuspicionMult 0", ErrInvalidConfig},
		{func(c *Config) { c.GossipNodes = 0 }, "GossipNodes 0", ErrInvalidConfig},
		{func(c *Config) { c.GossipInterval = -time.Second }, "GossipInterval -1s", ErrInvalidConfig},
		{func(c *Config) { c.TCPTimeout = 0 }, "TCPTimeout 0s", ErrInvalidConfig},
		{func(c *Config) { c.ForgetAfter = -time.Minute }, "ForgetAfter -1m0s", ErrInvalidConfig},
		{func(c *Config) { c.LeaveTimeout = 0 }, "LeaveTimeout 0s", ErrInvalidConfig},
	}
	for _, tt := range tests {
		c := base
		tt.change(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, tt.is) {
			t.Errorf("Validate() = %v, want an error containing %q wrapping %v", err, tt.want, tt.is)
		}
	}
	c := base
	c.Name, c.BindPort = "", -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Name") || !strings.Contains(err.Error(), "BindPort -1") {
		t.Errorf("Validate() = %v, want both Name and BindPort reported", err)
	}
}

func TestSuspicionTimeout(t *testing.T) {
	c := DefaultLANConfig()
	for _, tt := range []struct {
		n        int
		min, max time.Duration
	}{
		{1, 3 * time.Second, 12 * time.Second},
		{3, 3 * time.Second, 12 * time.Second},
		{100, 6 * time.Second, 24 * time.Second},
	} {
		min, max := c.SuspicionTimeout(tt.n)
		if min != tt.min || max != tt.max {
			t.Errorf("SuspicionTimeout(%d) = %v, %v; want %v, %v", tt.n, min, max, tt.min, tt.max)
		}
	}
}

func TestMemberlistConfig(t *testing.T) {
	for _, tc := range []struct {
		secret    string
		encrypted bool
	}{
		{"0123456789abcdef", true},
		{"", false},
	} {
		c := DefaultWiFiConfig()
		c.Name, c.BindAddr, c.Secret = "n1", "127.0.0.1", []byte(tc.secret)
		mc, err := MemberlistConfig(c)
		if err != nil {
			t.Fatalf("secret %q: %v", tc.secret, err)
		}
		if got := mc.Keyring != nil && mc.GossipVerifyIncoming && mc.GossipVerifyOutgoing; got != tc.encrypted {
			t.Errorf("secret %q: encrypted and verified = %v, want %v", tc.secret, got, tc.encrypted)
		}
		if mc.Name != c.Name || mc.ProbeInterval != c.ProbeInterval || mc.SuspicionMult != c.SuspicionMult ||
			mc.GossipInterval != c.GossipInterval || mc.GossipNodes != c.GossipNodes || mc.PushPullInterval != c.PushPullInterval ||
			mc.RetransmitMult != c.RetransmitMult || mc.IndirectChecks != c.IndirectChecks {
			t.Errorf("secret %q: memberlist config %+v does not carry the preset's name and timings %+v", tc.secret, mc, c)
		}
		if mc.EnableCompression {
			t.Errorf("secret %q: memberlist compresses every packet (a new 64 KiB LZW table each)", tc.secret)
		}
	}
	if _, err := MemberlistConfig(Config{Secret: []byte("short")}); !errors.Is(err, ErrSecretTooShort) {
		t.Errorf("short secret: err = %v, want ErrSecretTooShort", err)
	}
}
