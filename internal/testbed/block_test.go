package testbed

import "testing"

func TestBlockRules(t *testing.T) {
	for _, tt := range []struct {
		from []string
		want string
	}{
		{nil, "table inet shoal_testbed\ndelete table inet shoal_testbed\n"},
		{[]string{"10.77.12.12", "10.77.12.14"}, `table inet shoal_testbed
delete table inet shoal_testbed
table inet shoal_testbed {
	chain input {
		type filter hook input priority filter; policy accept;
		ip saddr { 10.77.12.12, 10.77.12.14 } tcp flags & (syn | ack) == syn drop
	}
}
`},
	} {
		if got := blockRules(tt.from); got != tt.want {
			t.Errorf("blockRules(%v) =\n%s\nwant\n%s", tt.from, got, tt.want)
		}
	}
}
