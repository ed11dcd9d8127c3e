package jobs

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/test/testenv"
)

// TestSubCommunicatorResumes runs subcomm on 3 ranks, which gives libshoal a
// communicator of its first 2 and parks the third, as NAS MG parks its
// surplus ranks: the epochs of 2 shards complete, the job says once that they
// cover 2 of its 3 ranks, and rank 1 killed, the job restarts from the newest
// and ends with the result of an uninterrupted run.
func TestSubCommunicatorResumes(t *testing.T) {
	prog := testenv.Built(t, "build/test/subcomm")
	b := up(t, 2)
	args := []string{"--steps", "300", "--pace", "20000"} // 6 s or more
	want := reference(t, "result", 3, append([]string{prog}, unpaced(args)...)...)
	j := submit(t, b, "n1", append([]string{"-n", "3", "--ckpt-interval", "500ms", "--layout", "cyclic", "--", prog}, args...)...)
	j.id = j.WaitLine(`^shoal: job ([^:]+):`, time.Minute)[1]
	j.WaitLine(`^shoal: launching 3 ranks on 2 nodes \(n1:0 n2:1 n1:2\)`, time.Minute)
	j.WaitLine(`epoch \d+ complete \(2 shards, `, 30*time.Second)
	j.WaitLine(`^shoal: checkpoints cover 2 of 3 ranks`, 5*time.Second)
	n2, err := b.Host("n2")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(testenv.RankPID(t, n2.DataDir, j.id, 1), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	epoch := j.WaitLine(`rank 1 killed by signal 9; restarting from epoch (\d+)`, time.Minute)[1]
	if code := j.Wait(2 * time.Minute); code != 0 {
		t.Fatalf("job exited %d:\n%s", code, grepShoal(j.Output()))
	}
	out := j.Output()
	if got := field(out, "result"); got != want {
		t.Errorf("result = %q, want %q (uninterrupted run)", got, want)
	}
	if !strings.Contains(out, "subcomm: resumed at step") || !strings.Contains(out, "), from epoch "+epoch) {
		t.Errorf("the job did not resume from epoch %s:\n%s", epoch, grepShoal(out))
	}
	if n := strings.Count(out, "checkpoints cover 2 of 3 ranks"); n != 1 {
		t.Errorf("said %d times that the checkpoints cover 2 of 3 ranks, want once", n)
	}
}
