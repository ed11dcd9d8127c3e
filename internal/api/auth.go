package api

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Authentication headers; docs/api.md shows an example.
const (
	HeaderAuthorization = "Authorization"          // "Shoal-HMAC-SHA256 " + hex signature
	HeaderTimestamp     = "X-Shoal-Timestamp"      // Unix seconds, decimal
	HeaderNonce         = "X-Shoal-Nonce"          // 32 hex digits, fresh per request
	HeaderContentSHA256 = "X-Shoal-Content-SHA256" // hex SHA-256 of the body ("" body included)
	HeaderNode          = "X-Shoal-Node"           // the agent the request is for: NAME/RUN, or * (health only)
	authScheme          = "Shoal-HMAC-SHA256"
)

// ClockWindow is how far a request's timestamp may be from the server's clock.
const ClockWindow = 60 * time.Second

// EmptySHA256 is the hex SHA-256 of an empty body.
const EmptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

const authKeyInfo = "shoal api"

// DeriveAuthKey returns the 32-byte HMAC key that signs API requests:
// HKDF-SHA256(secret, salt = none, info = "shoal api"). The gossip key uses
// another label, so neither key reveals the other.
func DeriveAuthKey(secret []byte) []byte {
	k, err := hkdf.Key(sha256.New, secret, nil, authKeyInfo, 32)
	if err != nil { // only for key lengths beyond 255×32 bytes
		panic(err)
	}
	return k
}

// AnyNode is the X-Shoal-Node value of a request for whichever agent answers:
// accepted on GET /v1/health only, which is how a client learns an agent's
// identity ([Health.Node]) before it sends anything else.
const AnyNode = "*"

// StringToSign is what the signature covers, one field per line:
//
//	Shoal-HMAC-SHA256
//	METHOD
//	request target (escaped path, then "?query" if any)
//	timestamp
//	nonce
//	node: the agent the request is for, NAME/RUN ([Health.Node]), or [AnyNode]
//	hex SHA-256 of the body
func StringToSign(method, target, timestamp, nonce, node, bodySHA256 string) string {
	return strings.Join([]string{authScheme, method, target, timestamp, nonce, node, bodySHA256}, "\n")
}

func signature(key []byte, msg string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

// Sign adds the authentication headers to r, for the agent node (NAME/RUN, or
// AnyNode), whose body has the given hex SHA-256 (EmptySHA256 for none), at
// time now.
func Sign(r *http.Request, key []byte, node, bodySHA256 string, now time.Time) {
	var n [16]byte
	rand.Read(n[:])
	nonce := hex.EncodeToString(n[:])
	ts := strconv.FormatInt(now.Unix(), 10)
	r.Header.Set(HeaderTimestamp, ts)
	r.Header.Set(HeaderNonce, nonce)
	r.Header.Set(HeaderContentSHA256, bodySHA256)
	r.Header.Set(HeaderNode, node)
	sig := signature(key, StringToSign(r.Method, r.URL.RequestURI(), ts, nonce, node, bodySHA256))
	r.Header.Set(HeaderAuthorization, authScheme+" "+sig)
}

// Verifier checks signed requests for one run of one agent and remembers
// nonces so that a captured request cannot be replayed. A request names the
// agent run it is for (node, NAME/RUN), so it is refused by every other node,
// and by this node's agent once restarted: each run's verifier has seen every
// nonce its run accepted, so no nonce needs to outlive the process. Safe for
// concurrent use.
type Verifier struct {
	key  []byte
	node string
	now  func() time.Time

	mu     sync.Mutex
	nonces map[string]time.Time // nonce → when it may be forgotten
	pruned time.Time
}

// NewVerifier returns a verifier for requests signed with key for the agent run
// node (NAME/RUN).
func NewVerifier(key []byte, node string) *Verifier {
	return &Verifier{key: key, node: node, now: time.Now, nonces: map[string]time.Time{}}
}

// NewRun returns a random name for one run of an agent: 16 hex digits.
func NewRun() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Verify checks r's headers: present, signature valid, for this agent run
// (or for any, when anyNode allows it), timestamp within ClockWindow, nonce
// never seen. It returns the body hash the signature covers; the caller checks
// the body against it ([Verifier.Body]). Errors wrap [ErrUnauthorized], or
// [ErrMisdirected] for a request signed for another node or run, and say what
// is wrong without revealing anything secret.
func (v *Verifier) Verify(r *http.Request, anyNode bool) (bodySHA256 string, err error) {
	auth := r.Header.Get(HeaderAuthorization)
	ts, nonce := r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderNonce)
	body, node := r.Header.Get(HeaderContentSHA256), r.Header.Get(HeaderNode)
	if auth == "" {
		return "", fmt.Errorf("%w: no %s header: requests must be signed with the cluster secret", ErrUnauthorized, HeaderAuthorization)
	}
	sig, ok := strings.CutPrefix(auth, authScheme+" ")
	if !ok {
		return "", fmt.Errorf("%w: %s scheme is not %s", ErrUnauthorized, HeaderAuthorization, authScheme)
	}
	if ts == "" || nonce == "" || body == "" || node == "" {
		return "", fmt.Errorf("%w: missing %s, %s, %s or %s header", ErrUnauthorized, HeaderTimestamp, HeaderNonce, HeaderNode, HeaderContentSHA256)
	}
	if len(nonce) != 32 || !isHex(nonce) || len(body) != 64 || !isHex(body) {
		return "", fmt.Errorf("%w: malformed %s or %s header", ErrUnauthorized, HeaderNonce, HeaderContentSHA256)
	}
	want := signature(v.key, StringToSign(r.Method, r.RequestURI, ts, nonce, node, body))
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return "", fmt.Errorf("%w: bad signature (wrong cluster secret?)", ErrUnauthorized)
	}
	if node != v.node && !(anyNode && node == AnyNode) {
		return "", fmt.Errorf("%w: request signed for agent %s, this is %s (sent to another node, or this agent restarted since)", ErrMisdirected, node, v.node)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", fmt.Errorf("%w: malformed %s header", ErrUnauthorized, HeaderTimestamp)
	}
	now := v.now()
	if skew := now.Sub(time.Unix(sec, 0)); skew > ClockWindow || skew < -ClockWindow {
		return "", fmt.Errorf("%w: timestamp %d is %v from this node's clock, more than ±%v (clocks out of sync?)",
			ErrUnauthorized, sec, skew.Round(time.Second), ClockWindow)
	}
	if !v.remember(nonce, time.Unix(sec, 0).Add(ClockWindow+time.Second), now) {
		return "", fmt.Errorf("%w: request replayed (nonce already used)", ErrUnauthorized)
	}
	return body, nil
}

// remember records nonce until expiry and reports whether it was new.
func (v *Verifier) remember(nonce string, expiry, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if now.Sub(v.pruned) > ClockWindow {
		for n, e := range v.nonces {
			if now.After(e) {
				delete(v.nonces, n)
			}
		}
		v.pruned = now
	}
	if _, seen := v.nonces[nonce]; seen {
		return false
	}
	v.nonces[nonce] = expiry
	return true
}

// Body returns a reader of body that fails with an error wrapping
// [ErrUnauthorized] at its end if the bytes read do not hash to bodySHA256, so
// that a tampered body is never accepted, even one too large to buffer.
func (v *Verifier) Body(body io.Reader, bodySHA256 string) io.Reader {
	return &hashReader{r: body, h: sha256.New(), want: bodySHA256}
}

type hashReader struct {
	r    io.Reader
	h    hash.Hash
	want string
	err  error
}

func (h *hashReader) Read(p []byte) (int, error) {
	if h.err != nil {
		return 0, h.err
	}
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	if err == io.EOF {
		if got := hex.EncodeToString(h.h.Sum(nil)); got != h.want {
			h.err = fmt.Errorf("%w: body does not match its signed SHA-256 (tampered or truncated)", ErrUnauthorized)
			return n, h.err
		}
	}
	if err != nil {
		h.err = err
	}
	return n, err
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
