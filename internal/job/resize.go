package job

import "fmt"

// Resized says a change of the job's count, for its line and event: "node n3
// lost (no answer for 80 ms): shrinking from 7 to 4 ranks (one per core on
// n1, n2), from epoch 5".
func Resized(cause string, from, to int, epoch uint64, why string) Event {
	verb := "growing"
	if to < from {
		verb = "shrinking"
	}
	msg := fmt.Sprintf("%s from %d to %d ranks", verb, from, to)
	if why != "" {
		msg += " (" + why + ")"
	}
	if cause != "" {
		msg = cause + ": " + msg
	}
	if epoch > 0 {
		msg += fmt.Sprintf(", from epoch %d", epoch)
	} else {
		msg += ", from the beginning: no complete checkpoint"
	}
	return NewEvent(EventResize, msg, Resize{From: from, To: to, Epoch: epoch, Why: why})
}
