package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/files"
	"shoal/internal/retention"
)

// UploadsDir, in the data dir, records which local user uploaded which file
// of the cache (files.Quota).
const UploadsDir = "uploads"

// DefaultFileQuota is Config.FileQuota's default: 10 GiB of files in the
// node's cache per local user other than root and the agent's own. A job's
// program and inputs are uploaded once, to the node a user submits on (the
// other nodes fetch them from it, uncounted), and stay an hour after their
// last use once no kept job names them: 10 GiB is more than the inputs of
// several jobs at once, and a tenth of a laptop's disk.
const DefaultFileQuota = 10 << 30

// quotaFiles is the file store as the local socket serves it: an upload by a
// local user other than root and the agent's own counts against their quota;
// anyone else's passes straight through.
type quotaFiles struct {
	api.DataService
	quota *files.Quota
	// unused is how long a file no kept job names stays after its last use,
	// which a refusal says.
	unused time.Duration
}

func (q *quotaFiles) PutFile(ctx context.Context, sum string, size int64, r io.Reader) error {
	c := api.CallerOf(ctx)
	if c == nil || c.Privileged() {
		return q.DataService.PutFile(ctx, sum, size, r)
	}
	err := q.quota.Put(c.UID, sum, size, r, func(r io.Reader) error {
		return q.DataService.PutFile(ctx, sum, size, r)
	})
	var qe *files.QuotaError
	switch {
	case errors.Is(err, files.ErrLargerThanQuota) && errors.As(err, &qe):
		return fmt.Errorf("%w: %s", errkind.TooLarge, qe.Describe(c.String()))
	case errors.As(err, &qe):
		return fmt.Errorf("%w: %s; a file no kept job names leaves the cache %v after its last use",
			errkind.OverQuota, qe.Describe(c.String()), q.unused)
	}
	return err
}

// newQuotaFiles returns the file store d under the agent's per-user quota, or
// d itself when there is none.
func (a *Agent) newQuotaFiles(d api.DataService) api.DataService {
	if d == nil || a.cfg.FileQuota <= 0 {
		return d
	}
	unused := retention.DefaultPolicy().UnusedFiles
	if a.cfg.Retention != nil {
		unused = a.cfg.Retention.UnusedFiles
	}
	return &quotaFiles{DataService: d, quota: a.quota, unused: unused}
}
