package launch

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestFrameRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("x"), MaxPayload)
	frames := []Frame{
		{FrameStdin, []byte("hello\n")},
		{FrameStdin, []byte{}},
		{FrameStdinClose, []byte{}},
		{FrameSignal, encodeSignal(15)},
		{FrameStdout, big},
		{FrameStderr, []byte("err")},
		{FrameExit, Exit{Signal: 9}.encode()},
		{FrameExit, Exit{Code: 3}.encode()},
	}
	var buf bytes.Buffer
	for _, f := range frames {
		if err := WriteFrame(&buf, f.Type, f.Payload); err != nil {
			t.Fatalf("write %v: %v", f.Type, err)
		}
	}
	// One byte at a time: every read of the header and payload is short.
	r := iotest.OneByteReader(bytes.NewReader(buf.Bytes()))
	for i, want := range frames {
		got, err := ReadFrame(r)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got.Type != want.Type || !bytes.Equal(got.Payload, want.Payload) {
			t.Errorf("frame %d: got %v of %d bytes, want %v of %d bytes", i, got.Type, len(got.Payload), want.Type, len(want.Payload))
		}
	}
	if _, err := ReadFrame(r); err != io.EOF {
		t.Errorf("after the last frame: got %v, want io.EOF", err)
	}
}

// TestFrameVector checks the example in docs/api.md.
func TestFrameVector(t *testing.T) {
	var buf bytes.Buffer
	WriteFrame(&buf, FrameStdinClose, nil)
	WriteFrame(&buf, FrameStdout, []byte("hi\n"))
	WriteFrame(&buf, FrameExit, Exit{Code: 0}.encode())
	if got, want := hex.EncodeToString(buf.Bytes()), "0200000000"+"0400000003"+"68690a"+"0600000005"+"0000000000"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	f, err := ReadFrame(strings.NewReader("\x06\x00\x00\x00\x05\x01\x00\x00\x00\x0f"))
	if err != nil {
		t.Fatal(err)
	}
	if e, err := decodeExit(f.Payload); err != nil || e != (Exit{Signal: 15}) || e.ExitCode() != 143 {
		t.Errorf("exit frame 01 0000000f: got %+v (code %d), %v; want signal 15, code 143", e, e.ExitCode(), err)
	}
}

func TestFrameErrors(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		want     error
	}{
		{"oversized", "\x04\x00\x10\x00\x01", ErrProtocol}, // MaxPayload + 1, nothing after
		{"huge", "\x04\xff\xff\xff\xff", ErrProtocol},
		{"unknown type", "\x07\x00\x00\x00\x00", ErrProtocol},
		{"type zero", "\x00\x00\x00\x00\x00", ErrProtocol},
		{"signal of 1 byte", "\x03\x00\x00\x00\x01\x0f", ErrProtocol},
		{"stdin-close with payload", "\x02\x00\x00\x00\x01x", ErrProtocol},
		{"exit of 4 bytes", "\x06\x00\x00\x00\x04\x00\x00\x00\x00", ErrProtocol},
		{"header cut short", "\x04\x00\x00", io.ErrUnexpectedEOF},
		{"payload cut short", "\x04\x00\x00\x00\x05abc", io.ErrUnexpectedEOF},
		{"no payload at all", "\x04\x00\x00\x00\x05", io.ErrUnexpectedEOF},
		{"empty", "", io.EOF},
	} {
		_, err := ReadFrame(strings.NewReader(tt.in))
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, err, tt.want)
		}
	}
	if err := WriteFrame(io.Discard, FrameStdout, make([]byte, MaxPayload+1)); !errors.Is(err, ErrProtocol) {
		t.Errorf("writing an oversized frame: got %v, want ErrProtocol", err)
	}
	if _, err := decodeExit([]byte{2, 0, 0, 0, 0}); !errors.Is(err, ErrProtocol) {
		t.Errorf("exit kind 2: got %v, want ErrProtocol", err)
	}
}

// TestFrameStreamChunks checks that large writes become frames of at most chunk bytes.
func TestFrameStreamChunks(t *testing.T) {
	var buf bytes.Buffer
	data := bytes.Repeat([]byte("0123456789"), chunk/5) // 2 chunks
	if n, err := (frameStream{&frameWriter{w: &buf}, FrameStdout}).Write(data); n != len(data) || err != nil {
		t.Fatalf("write = %d, %v", n, err)
	}
	var got []byte
	for {
		f, err := ReadFrame(&buf)
		if err == io.EOF {
			break
		}
		if err != nil || f.Type != FrameStdout || len(f.Payload) > chunk {
			t.Fatalf("frame %v of %d bytes, %v", f.Type, len(f.Payload), err)
		}
		got = append(got, f.Payload...)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("reassembled %d bytes, want %d", len(got), len(data))
	}
}
