package testbed

import (
	"fmt"
	"strings"
	"testing"
)

func TestBlockRules(t *testing.T) {
	for _, tt := range []struct {
		from, cut []string
		want      string
	}{
		{nil, nil, "table inet shoal_testbed\ndelete table inet shoal_testbed\n"},
		{[]string{"10.77.12.12", "10.77.12.14"}, nil, `table inet shoal_testbed
delete table inet shoal_testbed
table inet shoal_testbed {
	chain input {
		type filter hook input priority filter; policy accept;
		ip saddr { 10.77.12.12, 10.77.12.14 } tcp flags & (syn | ack) == syn drop
	}
}
`},
		{[]string{"10.77.12.12"}, []string{"10.77.12.13"}, `table inet shoal_testbed
delete table inet shoal_testbed
table inet shoal_testbed {
	chain input {
		type filter hook input priority filter; policy accept;
		ip saddr { 10.77.12.12 } tcp flags & (syn | ack) == syn drop
		ip saddr { 10.77.12.13 } tcp flags & rst == 0 reject with tcp reset
	}
}
`},
	} {
		if got := blockRules(tt.from, tt.cut); got != tt.want {
			t.Errorf("blockRules(%v, %v) =\n%s\nwant\n%s", tt.from, tt.cut, got, tt.want)
		}
	}
}

// TestSetBlocks: a host or a site on either side; every pair of the two groups is
// blocked, a host never from itself, and every host of both groups is given its
// rules again.
func TestSetBlocks(t *testing.T) {
	fresh := func() *state {
		s := &state{Sites: 2}
		for i, site := range []int{1, 1, 2, 2} {
			s.Hosts = append(s.Hosts, Host{Name: fmt.Sprintf("n%d", i+1), Site: site})
		}
		return s
	}
	blocked := func(s *state) string {
		var out []string
		for _, h := range s.Hosts {
			out = append(out, fmt.Sprintf("%s<%s", h.Name, strings.Join(h.BlockedFrom, ",")))
		}
		return strings.Join(out, " ")
	}
	names := func(hs []*Host) string {
		var out []string
		for _, h := range hs {
			out = append(out, h.Name)
		}
		return strings.Join(out, ",")
	}
	for _, tt := range []struct {
		node, peer            string
		wantBlocked, wantRule string
		wantErr               string
	}{
		{"n3", "n1", "n1< n2< n3<n1 n4<", "n3,n1", ""},
		{"s2", "s1", "n1< n2< n3<n1,n2 n4<n1,n2", "n3,n4,n1,n2", ""},
		{"n1", "s1", "n1<n2 n2< n3< n4<", "n1,n2", ""},
		{"s3", "n1", "", "", "site \"s3\""},
		{"n1", "n1", "", "", "cannot be blocked from itself"},
		{"n9", "n1", "", "", "\"n9\""},
	} {
		s := fresh()
		changed, err := s.setBlocks(tt.node, tt.peer, true)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("setBlocks(%s, %s): err %v, want one saying %s", tt.node, tt.peer, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("setBlocks(%s, %s): %v", tt.node, tt.peer, err)
		}
		if got := blocked(s); got != tt.wantBlocked {
			t.Errorf("setBlocks(%s, %s): blocks %s, want %s", tt.node, tt.peer, got, tt.wantBlocked)
		}
		if got := names(changed); got != tt.wantRule {
			t.Errorf("setBlocks(%s, %s): rules of %s given again, want %s", tt.node, tt.peer, got, tt.wantRule)
		}
		if _, err := s.setBlocks(tt.node, tt.peer, false); err != nil || blocked(s) != blocked(fresh()) {
			t.Errorf("unblocking %s from %s: %v, left %s", tt.node, tt.peer, err, blocked(s))
		}
	}
	s := &state{Hosts: []Host{{Name: "n1"}, {Name: "n2"}}}
	if _, err := s.setBlocks("s1", "n2", true); err == nil || !strings.Contains(err.Error(), `"s1"`) {
		t.Errorf("a site on a testbed without sites: err %v, want an unknown node", err)
	}
}
