package job

import (
	"fmt"
	"strings"
	"time"
)

// The words of the lines Shoal writes about jobs, shared by whoever writes them.

// Seconds writes a duration for people, as the other times in shoal's lines are
// written ("no answer for 4.4 s"): "0 s", "0.7 s", "12 s", "2m5s".
func Seconds(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", d.Seconds()), ".0") + " s"
	case d < 100*time.Second:
		return fmt.Sprintf("%.0f s", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// Millis writes a short time: "0.4 ms", "12 ms", and from a second on as
// Seconds does.
func Millis(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(d)/1e6), ".0") + " ms"
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	}
	return Seconds(d)
}

// Plural writes n with a noun, in the plural unless n is 1: "1 restart", "3 restarts".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
