package jobservice

import (
	"testing"
	"time"

	"shoal/internal/job"
)

// TestHandedOver: a new coordinator resumes a job from its hand-over only when
// the job's last coordinator made it and is another node.
func TestHandedOver(t *testing.T) {
	at := time.Unix(1700000000, 0)
	h := &job.Handover{From: "n1", Epoch: 5, At: at}
	tests := []struct {
		name   string
		info   job.Job
		self   string
		wantOK bool
	}{
		{"handed over by its coordinator", job.Job{Coordinator: "n1", Handover: h}, "n2", true},
		{"not handed over", job.Job{Coordinator: "n1"}, "n2", false},
		{"handed over by an earlier coordinator", job.Job{Coordinator: "n3", Handover: h}, "n2", false},
		{"handed over by this node, which leads again", job.Job{Coordinator: "n1", Handover: h}, "n1", false},
	}
	for _, tt := range tests {
		why, gotAt, ok := handedOver(tt.info, tt.self)
		if ok != tt.wantOK {
			t.Errorf("%s: got ok %v, want %v", tt.name, ok, tt.wantOK)
			continue
		}
		if !ok {
			continue
		}
		if want := "coordinator n1 left, handing the job over at epoch 5"; why != want {
			t.Errorf("%s: got why %q, want %q", tt.name, why, want)
		}
		if !gotAt.Equal(at) {
			t.Errorf("%s: got at %v, want %v", tt.name, gotAt, at)
		}
	}
}
