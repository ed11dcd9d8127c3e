package job

import (
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"strings"
)

// NewID names a new job after its program, with a random suffix: "heat-3f9a2c".
func NewID(program string) string {
	var b [3]byte
	rand.Read(b[:])
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, filepath.Base(program))
	if len(name) > 50 {
		name = name[:50]
	}
	return name + "-" + hex.EncodeToString(b[:])
}
