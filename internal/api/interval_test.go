package api

import (
	"reflect"
	"shoal/internal/job"
	"strings"
	"testing"
	"time"
)

// A job asks for an automatic interval or a fixed one, not both.
func TestValidateCheckpointAuto(t *testing.T) {
	base := job.Spec{Ranks: 2, Argv: []string{"/bin/true"}}
	for _, c := range []struct {
		auto           bool
		interval, mtbf time.Duration
		want           string
	}{
		{true, 0, 0, ""},
		{false, 30 * time.Second, 0, ""},
		{false, 0, 0, ""},
		{true, 0, time.Minute, ""},
		{true, 30 * time.Second, 0, "checkpoint_auto with checkpoint_interval 30s: want one of them"},
		{true, 0, -time.Minute, "mtbf -1m0s: want > 0"},
		{false, 30 * time.Second, time.Minute, "mtbf 1m0s without checkpoint_auto"},
	} {
		s := base
		s.CheckpointAuto, s.CheckpointInterval, s.MTBF = c.auto, job.Duration(c.interval), job.Duration(c.mtbf)
		err := s.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("auto %v, interval %v, mtbf %v: %v, want %q", c.auto, c.interval, c.mtbf, err, c.want)
		}
	}
}

func TestParseIntervalFile(t *testing.T) {
	got := ParseIntervalFile([]byte("interval 4.5 auto 1 cost 0.0125 mtbf 900\n"))
	want := &job.Interval{Every: job.Duration(4500 * time.Millisecond), Auto: true, Cost: job.Duration(12500 * time.Microsecond), MTBF: job.Duration(15 * time.Minute)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	for _, bad := range []string{"", "interval 4.5\n", "interval x auto 1 cost 0 mtbf 1\n", "interval 1 auto yes cost 0 mtbf 1\n",
		"interval 1 auto 1 cost -2 mtbf 1\n", "interval 1 auto 1 cost 0 mtbf 1e12\n", "period 1 auto 1 cost 0 mtbf 1\n"} {
		if iv := ParseIntervalFile([]byte(bad)); iv != nil {
			t.Errorf("%q: %+v, want nil", bad, iv)
		}
	}
}
