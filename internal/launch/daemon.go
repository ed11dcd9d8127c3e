package launch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Errors of [DaemonArgv] and of the daemon checks of [Service.Launch], wrapped
// with the detail.
var (
	// ErrNotSimple: the line is not one command of literal words, so running it
	// without a shell would not mean what it says.
	ErrNotSimple = errors.New("launch: not a single command of literal words")
	// ErrNotDaemon: the command's program is not one of the allowed daemons.
	ErrNotDaemon = errors.New("launch: not an MPI daemon")
	// ErrDaemonUnsafe: the daemon's file, or a directory above it, is not root's
	// alone, so another user could replace what the agent runs.
	ErrDaemonUnsafe = errors.New("launch: daemon not safe to run as root")
)

// DaemonArgv turns the command line an MPI launcher hands to ssh (what `shoal rsh`
// sends, its words joined with spaces) into the argument vector the agent executes
// directly, with no shell: the words with their quotes removed. Which program the
// first word may name is [Service.Launch]'s to check, by the file it is.
//
// Only one simple command of literal words is accepted, which is what Open MPI and
// Hydra send when mpirun is given no --prefix: quotes ('…', "…") and backslashes
// are removed as sh would, and anything sh would give a meaning beyond that — a
// separator (; & | newline), parentheses, a redirection, an expansion ($, `, a
// glob, ~ or # at the start of a word) or a leading VAR=value — is refused,
// since executed without a shell it would not do what the line says. So `orted ;
// id > file` is refused, and what runs is always the daemon itself.
//
// One wrapper is recognised and removed first: the subshell Open MPI (and
// PRRTE) put around the daemon when the launching user's login shell is sh-like
// (sh, dash, ksh; see [profileWrapper]). Only the exact wrapper counts, with its
// inside then held to the rule above; the .profile it would source is not read
// by anyone, since the agent runs no shell.
func DaemonArgv(line string) ([]string, error) {
	if inner, ok := cutProfileWrapper(line); ok {
		line = inner
	}
	words, err := literalWords(line)
	if err != nil {
		return nil, err
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("%w: the command is empty", ErrNotDaemon)
	}
	if i := strings.IndexByte(words[0], '='); i > 0 && isName(words[0][:i]) {
		return nil, fmt.Errorf("%w: %q sets a variable; the command must start with the daemon", ErrNotSimple, words[0])
	}
	return words, nil
}

// profileWrapper is what Open MPI's rsh launcher (plm_rsh, and PRRTE's plm_ssh
// after it) puts around the daemon's command when the login shell of the user
// running mpirun, as getpwuid gives it (or $SHELL when that is unknown), is one
// whose name contains "sh" but not bash, zsh or csh: /bin/sh, dash, ksh, mksh.
// Its words reach `shoal rsh` as separate arguments, so joined with spaces the
// line is profileWrapper.open, a blank, the command (which Open MPI starts with
// a blank of its own) and profileWrapper.close. Under ssh the remote login shell
// would source ./.profile first; the agent runs no shell and sources nothing.
var profileWrapper = struct{ open, close string }{
	open:  "( test ! -r ./.profile || . ./.profile; ",
	close: " )",
}

// cutProfileWrapper returns what line holds inside [profileWrapper], and
// whether line is exactly that wrapper around something. The inside is not
// checked here: [DaemonArgv] reads it as it reads any line, and a quote or
// escape that would reach into the closing parenthesis leaves it unterminated,
// so refused.
func cutProfileWrapper(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, profileWrapper.open)
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, profileWrapper.close)
}

// QuoteWord quotes a word of a command line that [DaemonArgv] is to read, so
// that it gives the word back unchanged: a word of only letters, digits and
// -_./=:,+@% as it is, any other in single quotes.
func QuoteWord(w string) string {
	if w != "" && strings.IndexFunc(w, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

func isName(s string) bool {
	for j := 0; j < len(s); j++ {
		c := s[j]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || j > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// literalWords splits line into words as sh would, refusing every character that
// would make sh do more than remove quotes (see [DaemonArgv]).
func literalWords(line string) ([]string, error) {
	var (
		words   []string
		cur     strings.Builder
		inWord  bool
		quote   byte // '\'' or '"' while inside quotes
		escaped bool
	)
	refuse := func(c byte, why string) ([]string, error) {
		return nil, fmt.Errorf("%w: %q %s", ErrNotSimple, string(c), why)
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case escaped:
			if c == '\n' {
				return refuse(c, "continues the line")
			}
			cur.WriteByte(c)
			escaped = false
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case quote == '"':
			switch c {
			case '"':
				quote = 0
			case '\\':
				// Inside double quotes a backslash only escapes these.
				if i+1 < len(line) && strings.IndexByte("$`\"\\", line[i+1]) >= 0 {
					i++
					cur.WriteByte(line[i])
				} else if i+1 < len(line) && line[i+1] == '\n' {
					return refuse('\n', "continues the line")
				} else {
					cur.WriteByte(c)
				}
			case '$', '`':
				return refuse(c, "would be expanded by a shell")
			default:
				cur.WriteByte(c)
			}
		case c == '\\':
			escaped, inWord = true, true
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case strings.IndexByte(";&|\n", c) >= 0:
			return refuse(c, "separates commands")
		case strings.IndexByte("()<>", c) >= 0:
			return refuse(c, "is shell syntax (a subshell or a redirection)")
		case strings.IndexByte("$`*?[", c) >= 0:
			return refuse(c, "would be expanded by a shell")
		case !inWord && (c == '~' || c == '#'):
			return refuse(c, "at the start of a word means something to a shell")
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 || escaped {
		return nil, fmt.Errorf("%w: unterminated quote or escape", ErrNotSimple)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// lookPath finds the program a daemon command names, as the shell that used to run
// it did: a name with a slash as it is (relative to dir), any other in the
// directories of pathList in order.
func lookPath(name, dir, pathList string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		return name, executable(name)
	}
	for _, d := range filepath.SplitList(pathList) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH", name)
}

func executable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%s: not an executable file", p)
	}
	return nil
}
