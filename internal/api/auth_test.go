package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

var (
	testSecret  = []byte("0123456789abcdef0123456789abcdef")
	wrongSecret = []byte("0123456789abcdef0123456789abcdeX")
)

// Vector computed independently (Python hmac/hashlib): docs/api.md shows it too.
func TestAuthVector(t *testing.T) {
	key := DeriveAuthKey(testSecret)
	if got, want := hex.EncodeToString(key), "5e9f41b65a8f5ac9735cc104bfbf90fb8d81a09298c0e3e2aba200f9470ae7c3"; got != want {
		t.Errorf("DeriveAuthKey = %s, want %s", got, want)
	}
	msg := StringToSign("GET", "/v1/nodes", "1700000000", "00112233445566778899aabbccddeeff", EmptySHA256)
	if got, want := signature(key, msg), "7193ecb536179e734b2474cd6ac099dbb54010769cae790086fca7e9188c0f71"; got != want {
		t.Errorf("signature = %s, want %s", got, want)
	}
	if h := sha256.Sum256(nil); hex.EncodeToString(h[:]) != EmptySHA256 {
		t.Errorf("EmptySHA256 is wrong")
	}
}

func signed(t *testing.T, secret []byte, method, target, body string, at time.Time) *http.Request {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	h := sha256.Sum256([]byte(body))
	Sign(r, DeriveAuthKey(secret), hex.EncodeToString(h[:]), at)
	return r
}

func TestVerify(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name string
		req  func() *http.Request
		want string // "" for success, else a substring of the error
	}{
		{"good", func() *http.Request { return signed(t, testSecret, "POST", "/v1/jobs?x=1", "{}", now) }, ""},
		{"clock 59s behind", func() *http.Request { return signed(t, testSecret, "GET", "/v1/nodes", "", now.Add(-59*time.Second)) }, ""},
		{"clock 59s ahead", func() *http.Request { return signed(t, testSecret, "GET", "/v1/nodes", "", now.Add(59*time.Second)) }, ""},
		{"wrong secret", func() *http.Request { return signed(t, wrongSecret, "GET", "/v1/nodes", "", now) }, "bad signature (wrong cluster secret?)"},
		{"expired", func() *http.Request { return signed(t, testSecret, "GET", "/v1/nodes", "", now.Add(-61*time.Second)) }, "clocks out of sync"},
		{"future", func() *http.Request { return signed(t, testSecret, "GET", "/v1/nodes", "", now.Add(2*time.Minute)) }, "clocks out of sync"},
		{"unsigned", func() *http.Request { return httptest.NewRequest("GET", "/v1/nodes", nil) }, "no Authorization header"},
		{"other scheme", func() *http.Request {
			r := signed(t, testSecret, "GET", "/v1/nodes", "", now)
			r.Header.Set("Authorization", "Bearer x")
			return r
		}, "scheme"},
		{"tampered path", func() *http.Request {
			r := signed(t, testSecret, "GET", "/v1/nodes", "", now)
			r.RequestURI = "/v1/jobs"
			return r
		}, "bad signature"},
		{"tampered method", func() *http.Request {
			r := signed(t, testSecret, "GET", "/v1/jobs/a", "", now)
			r.Method = "DELETE"
			return r
		}, "bad signature"},
		{"tampered timestamp", func() *http.Request {
			r := signed(t, testSecret, "GET", "/v1/nodes", "", now.Add(-5*time.Minute))
			r.Header.Set(HeaderTimestamp, "1700000000")
			return r
		}, "bad signature"},
		{"tampered body hash", func() *http.Request {
			r := signed(t, testSecret, "POST", "/v1/jobs", "{}", now)
			r.Header.Set(HeaderContentSHA256, EmptySHA256)
			return r
		}, "bad signature"},
		{"missing nonce", func() *http.Request {
			r := signed(t, testSecret, "GET", "/v1/nodes", "", now)
			r.Header.Del(HeaderNonce)
			return r
		}, "missing"},
	}
	for _, tt := range tests {
		v := NewVerifier(DeriveAuthKey(testSecret))
		v.now = func() time.Time { return now }
		_, err := v.Verify(tt.req())
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: Verify = %v, want success", tt.name, err)
		case tt.want != "" && (err == nil || !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: Verify = %v, want ErrUnauthorized containing %q", tt.name, err, tt.want)
		}
	}
}

func TestVerifyRejectsReplay(t *testing.T) {
	v := NewVerifier(DeriveAuthKey(testSecret))
	r := signed(t, testSecret, "POST", "/v1/leave", "", time.Now())
	if _, err := v.Verify(r); err != nil {
		t.Fatalf("first Verify = %v", err)
	}
	if _, err := v.Verify(r); !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "replayed") {
		t.Errorf("second Verify = %v, want replay refused", err)
	}
}

func TestBodyReaderDetectsTampering(t *testing.T) {
	v := NewVerifier(DeriveAuthKey(testSecret))
	h := sha256.Sum256([]byte("the body"))
	sum := hex.EncodeToString(h[:])
	if _, err := io.ReadAll(v.Body(strings.NewReader("the body"), sum)); err != nil {
		t.Errorf("reading the signed body: %v", err)
	}
	_, err := io.ReadAll(v.Body(strings.NewReader("the b0dy"), sum))
	if !errors.Is(err, ErrUnauthorized) {
		t.Errorf("reading a tampered body: error = %v, want ErrUnauthorized", err)
	}
}
