package api

import (
	"errors"
	"strings"
	"testing"
)

// TestLaunchRefusesControlBytes: a launch's words and environment follow the
// rules of a job's.
func TestLaunchRefusesControlBytes(t *testing.T) {
	tests := []struct {
		req  LaunchRequest
		want string // "" for accepted
	}{
		{LaunchRequest{Job: "j", Argv: []string{"orted", "-mca", "ess", "env"}, Env: map[string]string{"A": "b\tc"}}, ""},
		{LaunchRequest{Job: "j", Argv: []string{"orted", "-mca\x00"}}, "argv[1]: contains a NUL byte (byte 4)"},
		{LaunchRequest{Job: "j", Argv: []string{"orted"}, Env: map[string]string{"A": "\x1b"}}, `env "A": value contains control byte 0x1b (byte 0)`},
		{LaunchRequest{Job: "j", Argv: []string{"orted"}, Env: map[string]string{"A\n": "x"}}, `env key "A\n": contains control byte 0x0a (byte 1)`},
	}
	for _, tt := range tests {
		err := tt.req.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("argv %q env %q: %v, want accepted", tt.req.Argv, tt.req.Env, err)
		case tt.want != "" && (!errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("argv %q env %q: got %v, want a bad request containing %q", tt.req.Argv, tt.req.Env, err, tt.want)
		}
	}
}

// TestDurableRequest: a durable report names an epoch and a location as --durable
// takes it, with no credentials and nothing a log line would choke on.
func TestDurableRequest(t *testing.T) {
	tests := []struct {
		req  DurableRequest
		want string // "" for accepted
	}{
		{DurableRequest{Epoch: 4, Location: "s3://lab/jobs/heat", Took: 1.2}, ""},
		{DurableRequest{Epoch: 1, Location: "/shared/ckpt"}, ""},
		{DurableRequest{Location: "/shared/ckpt"}, "epoch 0: want the epoch kept"},
		{DurableRequest{Epoch: 1}, "location: want 1 to 1024 bytes"},
		{DurableRequest{Epoch: 1, Location: "/" + strings.Repeat("a", 1024)}, "location: want 1 to 1024 bytes"},
		{DurableRequest{Epoch: 1, Location: "ckpt"}, `location "ckpt": want an absolute directory or s3://BUCKET/PREFIX`},
		{DurableRequest{Epoch: 1, Location: "/a\nb"}, "control characters"},
		{DurableRequest{Epoch: 1, Location: "s3://key:secret@lab/jobs"}, "with no credentials in it"},
		{DurableRequest{Epoch: 1, Location: "/a", Took: -1}, "took -1: want seconds"},
		{DurableRequest{Epoch: 1, Location: "s3://lab/jobs", Endpoint: "http://10.77.0.1:8333"}, ""},
		{DurableRequest{Epoch: 1, Location: "s3://lab/jobs", Endpoint: "10.77.0.1:8333"}, "endpoint: want http(s)://HOST[:PORT]"},
		{DurableRequest{Epoch: 1, Location: "s3://lab/jobs", Endpoint: "http://key:secret@10.77.0.1"}, "endpoint: http(s)://HOST[:PORT], with no credentials in it"},
		{DurableRequest{Epoch: 1, Location: "s3://lab/jobs", Endpoint: "http://a\nb"}, "endpoint: want http(s)://HOST[:PORT]"},
		{DurableRequest{Location: "x", Took: -1}, "epoch 0: want the epoch kept, 1 or more; location \"x\": want an absolute directory or s3://BUCKET/PREFIX; took -1"},
	}
	for _, tt := range tests {
		err := tt.req.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v: %v, want accepted", tt.req, err)
		case tt.want != "" && (!errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%+v: got %v, want a bad request containing %q", tt.req, err, tt.want)
		}
	}
}

// TestUploadRequest: a node uploads to an object store only, an epoch's rank.
func TestUploadRequest(t *testing.T) {
	tests := []struct {
		req  UploadRequest
		want string // "" for accepted
	}{
		{UploadRequest{Location: "s3://lab/jobs/heat", Ranks: 4}, ""},
		{UploadRequest{Location: "s3://lab/jobs/heat", Endpoint: "http://10.0.0.5:8333", Ranks: 4, Rate: 20 << 20}, ""},
		{UploadRequest{Location: "/shared/ckpt", Ranks: 4}, "location: want s3://BUCKET/PREFIX"},
		{UploadRequest{Location: "s3://lab/a\tb", Ranks: 4}, "control characters"},
		{UploadRequest{Location: "s3://lab", Endpoint: "ftp://x", Ranks: 4}, "endpoint: want http(s)://HOST[:PORT]"},
		{UploadRequest{Location: "s3://lab", Ranks: 0}, "ranks 0: want 1 to 65536"},
		{UploadRequest{Location: "s3://lab", Ranks: 1, Rate: -1}, "rate -1: want bytes per second"},
	}
	for _, tt := range tests {
		err := tt.req.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v: %v, want accepted", tt.req, err)
		case tt.want != "" && (!errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%+v: got %v, want a bad request containing %q", tt.req, err, tt.want)
		}
	}
}

// TestDownloadRequest: a node downloads from an object store only, a shard of the
// size its manifest entry may say.
func TestDownloadRequest(t *testing.T) {
	tests := []struct {
		req  DownloadRequest
		want string // "" for accepted
	}{
		{DownloadRequest{Location: "s3://lab/jobs/heat", Ranks: 4, Size: 4096, Checksum: 7}, ""},
		{DownloadRequest{Location: "s3://lab", Endpoint: "https://s3.lab:8333", Ranks: 1, Size: 200, Rate: 20 << 20}, ""},
		{DownloadRequest{Location: "/shared/ckpt", Ranks: 4, Size: 4096}, "location: want s3://BUCKET/PREFIX"},
		{DownloadRequest{Location: "s3://lab/a\nb", Ranks: 4, Size: 4096}, "control characters"},
		{DownloadRequest{Location: "s3://lab", Endpoint: "file:///etc", Ranks: 4, Size: 4096}, "endpoint: want http(s)://HOST[:PORT]"},
		{DownloadRequest{Location: "s3://lab", Ranks: 0, Size: 4096}, "ranks 0: want 1 to 65536"},
		{DownloadRequest{Location: "s3://lab", Ranks: 1, Size: 4096, Rate: -5}, "rate -5: want bytes per second"},
		{DownloadRequest{Location: "s3://lab", Ranks: 1, Size: 0}, "size 0: want at least"},
		{DownloadRequest{Location: "s3://lab", Ranks: 1, Size: -1}, "size -1: want at least"},
		// Every bad field in one line.
		{DownloadRequest{Location: "gs://lab", Ranks: 1, Size: 10}, "location: want s3://BUCKET/PREFIX, at most 1024 bytes (a node uploads to and downloads from an object store only); size 10"},
	}
	for _, tt := range tests {
		err := tt.req.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v: %v, want accepted", tt.req, err)
		case tt.want != "" && (!errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%+v: got %v, want a bad request containing %q", tt.req, err, tt.want)
		}
	}
}
