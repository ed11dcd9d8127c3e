package main

import (
	"errors"
	"math"
	"regexp"
	"strconv"
	"time"
)

// errSecondsRange is a bare number of seconds too large for a duration.
var errSecondsRange = errors.New("out of range")

// bareSeconds is a number without a unit: "30", "0.5", ".5", "-5".
var bareSeconds = regexp.MustCompile(`^-?([0-9]+(\.[0-9]*)?|\.[0-9]+)$`)

// parseSeconds reads a time as libshoal reads SHOAL_CKPT_INTERVAL and
// SHOAL_MTBF (docs/libshoal.md): a bare number is seconds ("30", "0.5"),
// anything else a Go duration ("500ms", "1m30s"). A negative value is
// returned as such, for the caller to refuse naming its flag.
func parseSeconds(s string) (time.Duration, error) {
	if !bareSeconds.MatchString(s) {
		return time.ParseDuration(s)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	ns := v * float64(time.Second)
	if math.Abs(ns) >= math.MaxInt64 {
		return 0, errSecondsRange
	}
	return time.Duration(math.Round(ns)), nil
}

// secondsValue is a flag.Value of a duration given as parseSeconds reads it.
type secondsValue time.Duration

func (d *secondsValue) String() string { return time.Duration(*d).String() }

func (d *secondsValue) Set(s string) error {
	v, err := parseSeconds(s)
	if err != nil {
		return errors.New("want seconds (3600, 0.5) or a duration (90m, 1h30m)")
	}
	*d = secondsValue(v)
	return nil
}
