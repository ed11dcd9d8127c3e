package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"shoal/internal/api"
	"shoal/internal/files"
	"shoal/internal/node"
)

// cacheStore is the file store as the coordinator serves it: a files.Cache.
type cacheStore struct {
	api.Unavailable
	cache files.Cache
}

func (c cacheStore) HasFile(_ context.Context, sum string) (bool, error) {
	return c.cache.Has(sum), nil
}
func (c cacheStore) PutFile(_ context.Context, sum string, _ int64, r io.Reader) error {
	return c.cache.Put(sum, r)
}

// oneNode is the agent as the API server sees it, alone.
type oneNode struct{}

func (oneNode) Name() string                                { return "n1" }
func (oneNode) Nodes(context.Context) ([]node.Node, error)  { return nil, nil }
func (oneNode) Voters(context.Context) ([]node.Node, error) { return nil, nil }
func (oneNode) MembersAt(string) []node.Node                { return nil }
func (oneNode) Leave(context.Context) error                 { return nil }

// TestFileQuota: on the socket, the upload that would take a user's files in
// the cache over the quota is refused with 507, naming the quota and the use;
// a file larger than the quota with 413; a file already cached costs nothing;
// root has no quota; and the count outlives the agent.
func TestFileQuota(t *testing.T) {
	data := t.TempDir()
	newServer := func() *api.Server {
		a := &Agent{cfg: Config{DataDir: data, FileQuota: 10}}
		a.quota = &files.Quota{Cache: files.Cache{Dir: filepath.Join(data, FilesDir)}, Dir: filepath.Join(data, UploadsDir), Bytes: a.cfg.FileQuota}
		s := api.NewServer(api.ServerConfig{Node: oneNode{}, Secret: []byte("0123456789abcdef0123456789abcdef")})
		s.SetDataService(a.newQuotaFiles(cacheStore{cache: files.Cache{Dir: filepath.Join(data, FilesDir)}}))
		return s
	}
	alice := &api.Caller{UID: 1001, GID: 1001, Name: "alice"}
	bob := &api.Caller{UID: 1002, GID: 1002, Name: "bob"}
	root := &api.Caller{UID: 0, GID: 0, Name: "root"}
	tests := []struct {
		name    string
		who     *api.Caller
		content string
		status  int
		has     string // in the answer
	}{
		{"alice's first file", alice, "aaaa", 204, ""},
		{"alice's second file fills her quota", alice, "bbbbbb", 204, ""},
		{"one byte more is over the quota", alice, "c", 507, `"error":"api: over quota: alice (uid 1001) has 10 B of files in this node's cache (uploads in progress included) and a quota of 10 B: no room for a file of 1 B; a file no kept job names leaves the cache 1h0m0s after its last use","code":"over_quota"`},
		{"her file again costs nothing", alice, "aaaa", 204, ""},
		{"another user's file larger than the quota", bob, "01234567890", 413, `"error":"api: request too large: a file of 11 B is larger than the quota of 10 B of files per user","code":"too_large"`},
		{"alice's file costs bob nothing", bob, "bbbbbb", 204, ""},
		{"bob has his own room", bob, "dddd", 204, ""},
		{"root has no quota", root, "01234567890", 204, ""},
	}
	s := newServer()
	for _, tt := range tests {
		if status, body := upload(s, tt.who, tt.content); status != tt.status || !strings.Contains(body, tt.has) {
			t.Errorf("%s: PUT %q as %s = %d %s, want %d with %s", tt.name, tt.content, tt.who, status, body, tt.status, tt.has)
		}
	}
	if status, body := upload(newServer(), alice, "c"); status != 507 {
		t.Errorf("after a restart, alice's byte more: %d %s, want 507: the count comes from the record", status, body)
	}
	if st, err := os.Stat(filepath.Join(data, UploadsDir)); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the record of uploads: %v, %v; want a directory of mode 0700", st, err)
	}
}

// upload sends PUT /v1/files for content to s as if from its socket, as who.
func upload(s *api.Server, who *api.Caller, content string) (int, string) {
	h := sha256.Sum256([]byte(content))
	sum := hex.EncodeToString(h[:])
	r := httptest.NewRequest("PUT", "/v1/files/"+sum, strings.NewReader(content))
	r.Header.Set(api.HeaderContentSHA256, sum)
	r = r.WithContext(api.WithCaller(r.Context(), who))
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}
