package coord

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"shoal/internal/engine"
	"shoal/internal/epochs"
	"shoal/internal/job"
	"shoal/internal/jobdir"
	"shoal/internal/mtbf"
	"shoal/internal/place"
	"shoal/internal/shard"
	"shoal/internal/shardstore"
	"shoal/internal/staging"
)

// localBackend runs every rank of a job on this node; shards stay in this node's
// store.
type localBackend struct {
	j        *jobRun
	dir      jobdir.Dir
	complete map[uint64]shard.Header // verified complete epochs
	bad      map[uint64]bool         // epochs whose shards failed verification
	// mtbfRecord says what the run's SHOAL_MTBF rests on (auto interval).
	mtbfRecord string
	// intervalAt is the modification time of the interval file last read.
	intervalAt time.Time
	// launchAt is when the current run was prepared: a rank silent since
	// before is an earlier run's (checkHung).
	launchAt time.Time
}

var _ backend = (*localBackend)(nil)

func (b *localBackend) prepare(ctx context.Context, req launchRequest) (engine.Launch, []string, string, error) {
	j := b.j
	b.launchAt = time.Now()
	env := req.env
	nranks, where := j.ranks, "on 1 node"
	if nranks == 0 {
		nranks = j.spec.Ranks
	}
	if nranks == 0 {
		// An elastic job left its count to the coordinator: one rank per
		// core of this node, as the job allows; the node stays the same, so
		// the count does too.
		lo, hi := j.spec.Range()
		sized, err := place.Size(place.Input{Nodes: []place.Node{{Name: "this node", Cores: j.cfg.Cores}}},
			place.Sizing{Lo: lo, Hi: hi, Allows: j.spec.Allows})
		if err != nil {
			return engine.Launch{}, nil, "", err
		}
		nranks, where = sized.Ranks, fmt.Sprintf("(%s) on 1 node", sized.Why)
	}
	if j.spec.CheckpointAuto {
		node, why := mtbf.NodeMTBF(time.Duration(j.spec.MTBF), mtbf.Estimate{}) // one machine keeps no record: the prior
		if j.spec.MTBF == 0 {
			why = "the prior, as one machine keeps no failure record"
		}
		env = append(env, mtbf.Env(node, 1))
		b.mtbfRecord = why
	}
	l := engine.Launch{
		NRanks: nranks, LocalRanks: nranks, Program: j.spec.Argv[0], Args: j.spec.Argv[1:], Dir: j.cfg.Workdir,
		Wrapper:       append(staging.RankWrapper(j.cfg.ShoalBin), "--"),
		Oversubscribe: nranks > j.cfg.Cores,
		Env: append(append(env, staging.EnvList(j.spec.Env)...),
			"SHOAL_DIR="+j.cfg.CkptRoot,
			engine.EnvRanksDir+"="+req.ranksDir),
	}
	return l, nil, where, nil
}

// watch has nothing to follow: poll reads this node's store on every tick.
func (b *localBackend) watch(ctx context.Context) (<-chan struct{}, func()) { return nil, func() {} }

func (b *localBackend) poll(ctx context.Context) *nodeLoss {
	b.scanEpochs()
	if b.j.spec.CheckpointAuto {
		b.readInterval()
	}
	return b.checkHung()
}

// checkHung returns the loss that ends the run when its ranks stopped making
// snapshot calls (job.Hung), or nil: on one machine as on a cluster, from
// the ranks' alive files, read here at every poll.
func (b *localBackend) checkHung() *nodeLoss {
	if b.j.spec.HangAfter == job.HangOff {
		return nil
	}
	now := time.Now()
	var silent []job.Silent
	for _, s := range shardstore.SilentIn(b.dir) {
		if !now.Add(-time.Duration(s.For)).Before(b.launchAt) {
			s.Node = "this node"
			silent = append(silent, s)
		}
	}
	h, ok := job.Hung(silent, b.j.spec.HangAfter)
	if !ok {
		return nil
	}
	return &nodeLoss{hung: &h, reason: h.String(), at: now.Add(-time.Duration(h.For))}
}

// readInterval reports the interval rank 0 chose when its file changed since
// the last poll: a stat a poll, a read after a checkpoint's cost is measured.
func (b *localBackend) readInterval() {
	path := filepath.Join(b.dir.Path(), jobdir.Interval)
	fi, err := b.dir.Tree().Lstat(path)
	if err != nil || fi.ModTime().Equal(b.intervalAt) {
		return
	}
	data, err := b.dir.Tree().ReadFile(path, 1<<20)
	if err != nil {
		return
	}
	b.intervalAt = fi.ModTime()
	if iv := jobdir.ParseInterval(data); iv != nil {
		iv.Record = b.mtbfRecord
		b.j.reportInterval(iv)
	}
}

func (b *localBackend) finish(ctx context.Context, local []engine.RankState, failed bool, noticed *engine.Notice) ([]engine.RankState, *nodeLoss) {
	b.scanEpochs() // the last epoch may have completed as the run ended
	if b.j.spec.CheckpointAuto {
		b.readInterval() // and the last checkpoint's cost been measured
	}
	return noticed.Apply(local, time.Now().UnixNano()), nil
}

func (b *localBackend) epochBase(uint64) uint64 {
	base := uint64(1)
	if present, _ := b.dir.Epochs(); len(present) > 0 {
		base = present[len(present)-1] + 1
	}
	for e := range b.complete {
		base = max(base, e+1)
	}
	return base
}

// scanEpochs records every epoch whose shards are all written, each whole as its
// header describes it. Their checksums are verified once, when a restart needs the
// epoch (choose): the ranks hashed the bytes they wrote, and reading them all back
// here, while the ranks compute, would cost the job a second pass over its state.
func (b *localBackend) scanEpochs() {
	present, err := b.dir.Epochs()
	if err != nil {
		return
	}
	n := b.j.ranks
	for _, e := range present {
		if _, ok := b.complete[e]; ok || b.bad[e] || b.dir.ShardCount(e) < n {
			continue
		}
		h, err := b.dir.CheckEpoch(e, n)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // removed by retention while we looked
			}
			b.bad[e] = true
			b.j.event(job.EventEpochBad, job.Event{Epoch: e, Message: fmt.Sprintf("warning: epoch %d not counted: %v", e, err)})
			continue
		}
		b.complete[e] = h
		b.j.event(job.EventEpoch, job.Event{Epoch: e, Message: fmt.Sprintf("epoch %d complete (%d shards)", e, n)})
	}
}

// choose picks the newest complete epoch whose every shard verifies now, and removes
// incomplete epoch directories a killed run left behind. With none, the job starts
// from the beginning, loudly (the skipped epochs are reported).
func (b *localBackend) choose(ctx context.Context) (restartPoint, error) {
	present, _ := b.dir.Epochs()
	var candidates []uint64
	for _, e := range present {
		if _, ok := b.complete[e]; ok {
			candidates = append(candidates, e)
		} else if !b.bad[e] {
			b.dir.RemoveEpoch(e)
		}
	}
	var h shard.Header
	epoch, skipped, err := epochs.Choose(candidates, func(e uint64) error {
		var err error
		h, err = b.dir.VerifyEpoch(e, b.j.ranks)
		return err
	})
	if errors.Is(err, epochs.ErrNoEpoch) {
		return restartPoint{skipped: skipped}, nil
	}
	return restartPoint{epoch: epoch, header: h, skipped: skipped}, nil
}

// Kept is what an earlier run of a job on this node left for a new run of the
// same job to resume from: the epochs in its checkpoint directory.
type Kept struct {
	// Why names the run that kept them, for the line that announces the
	// resume: "an earlier run, cancelled 12 s ago".
	Why string
}

// RunKept runs spec as [Run] does, but from the newest complete epoch an
// earlier run of the same job left in cfg.CkptRoot, and says so in one event:
// "resuming job J from epoch N (kept by WHY)". The epochs found are the job's
// own from the start: none is announced again as complete. With none that
// verifies, the job starts from the beginning, and the event says so. Whether
// the earlier run was the same job (its program and arguments) is the
// caller's to settle.
func RunKept(ctx context.Context, cfg Config, spec job.Spec, out Output, kept Kept) Result {
	return runLocal(ctx, cfg, spec, out, &kept)
}

// adopt takes the complete epochs an earlier run left as the job's own,
// silently, and makes the first launch start from the newest that verifies.
func (b *localBackend) adopt(ctx context.Context, kept Kept) {
	j := b.j
	n := j.spec.Ranks
	if j.spec.Elastic() {
		// An elastic job's count on this node was chosen by the earlier run:
		// its shards say which.
		n = b.keptRanks()
	}
	j.ranks = n
	if present, err := b.dir.Epochs(); err == nil && n > 0 {
		for _, e := range present {
			if b.dir.ShardCount(e) < n {
				continue
			}
			if h, err := b.dir.CheckEpoch(e, n); err == nil {
				b.complete[e] = h
			}
		}
	}
	rp, _ := b.choose(ctx)
	epoch, skipped := rp.epoch, rp.skipped
	for _, s := range skipped {
		j.event(job.EventEpochBad, job.Event{Epoch: s.Epoch, Message: fmt.Sprintf("warning: epoch %d unusable (%v); falling back", s.Epoch, s.Err)})
	}
	j.first = relaunch{epoch: epoch, note: func(int, string, bool) string {
		if epoch == 0 {
			return fmt.Sprintf("job %s: %s kept no complete epoch; starting from the beginning", j.spec.ID, kept.Why)
		}
		return fmt.Sprintf("resuming job %s from epoch %d (kept by %s)", j.spec.ID, epoch, kept.Why)
	}}
}

// keptRanks is the rank count that wrote the newest epoch holding rank 0's
// shard, from that shard's header; 0 when none can be read.
func (b *localBackend) keptRanks() int {
	present, _ := b.dir.Epochs()
	for i := len(present) - 1; i >= 0; i-- {
		f, st, err := jobdir.OpenShard(b.dir.Tree(), b.dir.ShardPath(present[i], 0))
		if err != nil {
			continue
		}
		h, err := shard.ReadHeader(f, st.Size())
		f.Close()
		if err == nil && h.NRanks > 0 {
			return int(h.NRanks)
		}
	}
	return 0
}
