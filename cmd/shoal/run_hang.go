package main

import (
	"fmt"

	"shoal/internal/job"
)

// hangFlag is --hang-after: auto (0, the default rule), off (job.HangOff), or
// seconds or a duration of at least job.MinHangAfter.
type hangFlag job.Duration

func (f *hangFlag) String() string {
	switch job.Duration(*f) {
	case 0:
		return "auto"
	case job.HangOff:
		return "off"
	}
	return job.Duration(*f).String()
}

func (f *hangFlag) Set(v string) error {
	switch v {
	case "auto":
		*f = 0
		return nil
	case "off":
		*f = hangFlag(job.HangOff)
		return nil
	}
	d, err := parseSeconds(v)
	if err != nil || d < job.MinHangAfter {
		return fmt.Errorf("want auto, off, or seconds (30) or a duration (90s, 2m) of at least %v", job.MinHangAfter)
	}
	*f = hangFlag(d)
	return nil
}

// hangUsage is --hang-after's help.
const hangUsage = "declare the job hung when its ranks make no snapshot call for `DURATION` (seconds or a duration, at least 1s), a rank of them idle, and relaunch it from its newest complete epoch; auto: ten times a rank's usual time between calls, at least 10 s; off: never. Only programs that use libshoal make calls"
