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
	for _, v := range []struct{ node, sig string }{
		{"n1/0011223344556677", "9b18504f28a07e1dd1c2b2d9489b3c0c41b74302f6c170f7f1525c9fca1f8940"},
		{AnyNode, "78c3476286f96c7de2217a8989ff7a4b5821b44d659277dd6567def39a031c8c"},
	} {
		msg := StringToSign("GET", "/v1/nodes", "1700000000", "00112233445566778899aabbccddeeff", v.node, EmptySHA256)
		if got := signature(key, msg); got != v.sig {
			t.Errorf("signature for node %s = %s, want %s", v.node, got, v.sig)
		}
	}
	if h := sha256.Sum256(nil); hex.EncodeToString(h[:]) != EmptySHA256 {
		t.Errorf("EmptySHA256 is wrong")
	}
}

// testNode is the agent run the verifiers of these tests check requests for.
const testNode = "n1/0011223344556677"

func signed(t *testing.T, secret []byte, method, target, body string, at time.Time) *http.Request {
	t.Helper()
	return signedFor(t, testNode, secret, method, target, body, at)
}

func signedFor(t *testing.T, node string, secret []byte, method, target, body string, at time.Time) *http.Request {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	h := sha256.Sum256([]byte(body))
	Sign(r, DeriveAuthKey(secret), node, hex.EncodeToString(h[:]), at)
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
		{"missing node", func() *http.Request {
			r := signed(t, testSecret, "GET", "/v1/nodes", "", now)
			r.Header.Del(HeaderNode)
			return r
		}, "missing"},
		{"tampered node", func() *http.Request {
			r := signedFor(t, "n2/0011223344556677", testSecret, "GET", "/v1/nodes", "", now)
			r.Header.Set(HeaderNode, testNode)
			return r
		}, "bad signature"},
	}
	for _, tt := range tests {
		v := NewVerifier(DeriveAuthKey(testSecret), testNode)
		v.now = func() time.Time { return now }
		_, err := v.Verify(tt.req(), false)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: Verify = %v, want success", tt.name, err)
		case tt.want != "" && (err == nil || !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: Verify = %v, want ErrUnauthorized containing %q", tt.name, err, tt.want)
		}
	}
}

// TestVerifyRefusesOtherNodes: a request signed for one agent run is refused by
// another node's agent and by a later run of the same agent, which has not seen
// its nonce; one for any node passes only where the caller allows it (health).
func TestVerifyRefusesOtherNodes(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		name, node string
		anyNode    bool
		ok         bool
	}{
		{"this run", testNode, false, true},
		{"another node", "n2/0011223344556677", false, false},
		{"an earlier run", "n1/8899aabbccddeeff", false, false},
		{"any node, not allowed", AnyNode, false, false},
		{"any node, allowed", AnyNode, true, true},
	} {
		v := NewVerifier(DeriveAuthKey(testSecret), testNode)
		_, err := v.Verify(signedFor(t, tt.node, testSecret, "POST", "/v1/launch", "{}", now), tt.anyNode)
		switch {
		case tt.ok && err != nil:
			t.Errorf("%s: Verify = %v, want success", tt.name, err)
		case !tt.ok && (!errors.Is(err, ErrMisdirected) || !strings.Contains(err.Error(), "this is "+testNode)):
			t.Errorf("%s: Verify = %v, want ErrMisdirected naming %s", tt.name, err, testNode)
		}
	}
}

func TestVerifyRejectsReplay(t *testing.T) {
	v := NewVerifier(DeriveAuthKey(testSecret), testNode)
	r := signed(t, testSecret, "POST", "/v1/leave", "", time.Now())
	if _, err := v.Verify(r, false); err != nil {
		t.Fatalf("first Verify = %v", err)
	}
	if _, err := v.Verify(r, false); !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "replayed") {
		t.Errorf("second Verify = %v, want replay refused", err)
	}
}

func TestBodyReaderDetectsTampering(t *testing.T) {
	v := NewVerifier(DeriveAuthKey(testSecret), testNode)
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
