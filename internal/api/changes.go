package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"shoal/internal/shard"
)

// MaxChangesBlocks bounds the blocks a changes request may name: the blocks
// of a 256 GiB shard.
const MaxChangesBlocks = 1 << 20

// HeaderShardSize is the length in bytes of the shard whose changes an answer
// carries, decimal.
const HeaderShardSize = "X-Shoal-Shard-Size"

// ChangesRequest is the body of POST /v1/shards/{job}/{epoch}/{rank}/changes:
// the receiver holds an earlier shard of the rank whose blocks of BlockSize
// bytes have the XXH3-64 sums Sums, in order.
type ChangesRequest struct {
	BlockSize int       `json:"block_size"`
	Sums      BlockSums `json:"sums"`
}

// BlockSums are blocks' XXH3-64 sums, in JSON an array of 16-digit lowercase
// hex strings.
type BlockSums []uint64

func (b BlockSums) MarshalJSON() ([]byte, error) {
	out := make([]byte, 0, 2+19*len(b))
	out = append(out, '[')
	for i, s := range b {
		if i > 0 {
			out = append(out, ',')
		}
		out = fmt.Appendf(out, `"%016x"`, s)
	}
	return append(out, ']'), nil
}

func (b *BlockSums) UnmarshalJSON(data []byte) error {
	var hex []string
	if err := json.Unmarshal(data, &hex); err != nil {
		return err
	}
	sums := make([]uint64, len(hex))
	for i, h := range hex {
		v, err := strconv.ParseUint(h, 16, 64)
		if err != nil || len(h) != 16 {
			return fmt.Errorf("sum %d is %q: want 16 hex digits", i, h)
		}
		sums[i] = v
	}
	*b = sums
	return nil
}

// Validate checks the request's block size and length.
func (c ChangesRequest) Validate() error {
	if c.BlockSize != shard.BlockSize {
		return fmt.Errorf("%w: block_size %d: this node counts changes in blocks of %d bytes", ErrBadRequest, c.BlockSize, shard.BlockSize)
	}
	if len(c.Sums) > MaxChangesBlocks {
		return fmt.Errorf("%w: %d sums: at most %d", ErrBadRequest, len(c.Sums), MaxChangesBlocks)
	}
	return nil
}

// ShardChangesSender is a [ShardService] that can send a shard as its changes
// since an earlier shard of the rank. The server uses it, when the service
// implements it, for POST …/changes; same concurrency and error contract as
// ShardService.
type ShardChangesSender interface {
	// OpenShardChanges opens the changes of ref's shard since a shard whose
	// blocks have the sums base: r yields n bytes, the bitmap of the blocks
	// sent, their sums, and those blocks; size is the shard's; compress as for
	// [ShardSender.OpenShardToSend] (link 0: unknown, never compressed).
	OpenShardChanges(ctx context.Context, ref shard.Ref, link float64, base []uint64) (r io.ReadCloser, size, n int64, compress bool, err error)
}

// shardChanges sends a shard's changes since the receiver's earlier shard,
// compressed as getShard would compress the shard.
func (s *Server) shardChanges(w http.ResponseWriter, r *http.Request) error {
	ref, link, err := shardAndLink(r)
	if err != nil {
		return err
	}
	var req ChangesRequest
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	sender, ok := s.shardService().(ShardChangesSender)
	if !ok {
		return fmt.Errorf("%w: this node sends no shard's changes", ErrNotFound)
	}
	if link > 0 && !headerHasToken(r.Header, "Accept-Encoding", EncodingZstd) {
		link = 0
	}
	rc, size, n, compress, err := sender.OpenShardChanges(r.Context(), ref, link, req.Sums)
	if err != nil {
		return err
	}
	w.Header().Set(HeaderShardSize, strconv.FormatInt(size, 10))
	what := "changes of shard " + ref.String()
	if compress {
		return sendZstd(w, r, rc, n, what)
	}
	return sendBytes(w, r, rc, n, what)
}

// GetShardChanges calls POST /v1/shards/{job}/{epoch}/{rank}/changes: ref's
// shard as its changes since an earlier shard of the rank whose blocks have
// the sums base, over a link of link bytes/s (0 when unknown) as for
// [Client.GetShardOver]. The reader yields the bitmap of the blocks sent,
// their sums and those blocks, decoded, and its Wire method how many bytes of
// them have crossed the network; size is the shard's. The caller closes it
// and checks what it stores.
func (c *Client) GetShardChanges(ctx context.Context, ref shard.Ref, link float64, base []uint64) (io.ReadCloser, int64, error) {
	b, err := json.Marshal(ChangesRequest{BlockSize: shard.BlockSize, Sums: base})
	if err != nil {
		return nil, 0, fmt.Errorf("%w: encoding request: %v", ErrBadRequest, err)
	}
	path := shardPath(ref) + "/changes"
	if link > 0 {
		path += linkQuery(link)
	}
	resp, err := c.sendAcceptingZstd(ctx, "POST", path, b)
	if err != nil {
		return nil, 0, err
	}
	v := resp.Header.Get(HeaderShardSize)
	size, err := strconv.ParseInt(v, 10, 64)
	if err != nil || size < 0 {
		resp.Body.Close()
		return nil, 0, fmt.Errorf("%w: POST %s at %s: answered with %s %q, want the shard's size", ErrInternal, path, c.addr, HeaderShardSize, v)
	}
	rc, _, err := c.shardBody(resp, path, "changes of shard "+ref.String())
	if err != nil {
		return nil, 0, err
	}
	return rc, size, nil
}
