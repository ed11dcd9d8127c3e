package job

import (
	"testing"
	"time"
)

// A "durable" event records the epoch kept outside the cluster in the job, with
// the event's time; a newer one replaces it, and other events leave it.
func TestApplyDurable(t *testing.T) {
	var j Job
	at := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	e := NewEvent(EventDurable, "epoch 4 kept in s3://lab/jobs/heat (1.2 s)", Durable{Epoch: 4, Location: "s3://lab/jobs/heat"})
	e.Time, e.Epoch = at, 4
	j.Apply(e)
	if j.Durable == nil || *j.Durable != (Durable{Epoch: 4, Location: "s3://lab/jobs/heat", At: at}) {
		t.Fatalf("after a durable event: %+v", j.Durable)
	}
	if j.Epoch != 0 {
		t.Errorf("a durable event set the newest complete epoch to %d", j.Epoch)
	}
	j.Apply(Event{Type: EventEpoch, Epoch: 6, Time: at.Add(time.Second)})
	if j.Durable.Epoch != 4 {
		t.Errorf("an epoch event changed the durable epoch to %d", j.Durable.Epoch)
	}
	e = NewEvent(EventDurable, "epoch 6 kept in s3://lab/jobs/heat", Durable{Epoch: 6, Location: "s3://lab/jobs/heat"})
	e.Time = at.Add(2 * time.Second)
	j.Apply(e)
	if j.Durable.Epoch != 6 || !j.Durable.At.Equal(e.Time) {
		t.Errorf("after a newer durable event: %+v", j.Durable)
	}
	j.Apply(Event{Type: EventDurable, Data: []byte(`not json`)})
	if j.Durable.Epoch != 6 {
		t.Errorf("a malformed durable event changed the record: %+v", j.Durable)
	}
}
