package overlay

// Keep reports whether, between node local and node peer, the tunnel that
// dialer (one of the two) dialled is the one kept when both sides dialled and
// both connections came up: the one the node of the smaller name dialled. Both
// sides decide alike without a word, so they close the same one. A tunnel is
// one connection carrying both directions, so one that only one side could
// dial serves the pair as well as any.
func Keep(local, peer, dialer string) bool {
	return dialer == min(local, peer)
}
