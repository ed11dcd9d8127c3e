package testbed

import "testing"

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
