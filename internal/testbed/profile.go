package testbed

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Profile is a device condition a host can have (`up --profile wifi`): what its link does
// to every frame, beyond the bandwidth limit.
type Profile struct {
	// Name is what --profile takes.
	Name string
	// Delay is how long each frame is held on the host's link, each direction; Jitter
	// spreads it uniformly over Delay ± Jitter (netem's default distribution), without
	// reordering a direction's frames (see [delayLine]). Both 0: no delay line.
	Delay, Jitter time.Duration
	// Loss is the chance that a frame is dropped, each direction, 0 to 1.
	Loss float64
	// Rate is the host's bandwidth in tc syntax, unless the host has a Rate of its own.
	Rate string
	// NoSysVIPC puts every process of the host under a seccomp filter that kills a
	// process calling SysV IPC (shmget, semget, msgget, …) with SIGSYS.
	NoSysVIPC bool
	// ProcessLimit, when > 0, is how many processes the host keeps: a watchdog kills
	// the newest beyond it.
	ProcessLimit int
	// Source says where the figures come from.
	Source string
}

// WiFi is a phone or laptop on a busy Wi-Fi. The delay is the median of the Wi-Fi hop
// measured by Pei et al. ("WiFi can be the weakest link of round trip network latency in
// the wild", IEEE INFOCOM 2016: 47 access points of a campus over two months, more than
// half of the TCP packets spent over 20 ms in the Wi-Fi hop, a tenth over 100 ms): 20 ms
// there and back, 10 ms each way, spread ±8 ms. The long tail is left out. The loss (what
// the 802.11 retries do not recover) and the rate are round figures of ours, not
// measured: 1 % each way makes TCP retransmit now and then, and 40 Mbit/s is a phone's
// share of a 2.4 GHz home network.
var WiFi = Profile{
	Name: "wifi", Delay: 10 * time.Millisecond, Jitter: 8 * time.Millisecond, Loss: 0.01, Rate: "40mbit",
	Source: "Pei et al., IEEE INFOCOM 2016 (delay); loss and rate round figures",
}

// Profiles are the profiles by name.
var Profiles = map[string]Profile{WiFi.Name: WiFi, Android.Name: Android}

func profileNames() string {
	var names []string
	for n := range Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// lookupProfile returns the profile called name: none for "" or "none".
func lookupProfile(name string) (Profile, bool, error) {
	switch name {
	case "", "none":
		return Profile{}, false, nil
	}
	p, ok := Profiles[strings.ToLower(name)]
	if !ok {
		return Profile{}, false, fmt.Errorf("unknown profile: want none or one of %s", profileNames())
	}
	return p, true, nil
}

// delays says whether the profile needs a delay line on the host's link.
func (p Profile) delays() bool { return p.Delay > 0 || p.Jitter > 0 || p.Loss > 0 }
