package launch

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// A command line quoted word by word is parsed back by DaemonArgv into the same
// words, whatever they hold.
func TestQuoteWordRoundTrip(t *testing.T) {
	words := []string{"", "plain", "a b", "it's", `"q"`, `$HOME`, "`id`", "*.c", "~x", "#c", "a;b", "x|y", "(s)", "<in", `back\slash`, "tab\there", "{}", "é ü"}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		argv := []string{"shoal", "exec-task"}
		for k := rng.Intn(5); k > 0; k-- {
			w := words[rng.Intn(len(words))]
			if rng.Intn(3) == 0 {
				b := make([]byte, rng.Intn(8))
				for j := range b {
					b[j] = byte(1 + rng.Intn(126)) // no NUL, newlines included
				}
				w = string(b)
			}
			argv = append(argv, w)
		}
		quoted := make([]string, len(argv))
		for j, w := range argv {
			quoted[j] = QuoteWord(w)
		}
		got, err := DaemonArgv(strings.Join(quoted, " "))
		if err != nil || !reflect.DeepEqual(got, argv) {
			t.Fatalf("DaemonArgv(quoted %q) = %q, %v; want the words back", argv, got, err)
		}
	}
}
