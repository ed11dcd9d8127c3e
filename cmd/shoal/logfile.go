package main

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// logFile is the agent's --log-file: appended to, and opened again under its
// name on SIGHUP, so that logrotate may rename it and have the agent write to
// a new file of that name (its postrotate sends the signal). Safe for
// concurrent use.
type logFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

// openLogFile opens path for appending, creating it mode 0600.
func openLogFile(path string) (*logFile, error) {
	f, err := openLog(path)
	if err != nil {
		return nil, err
	}
	return &logFile{path: path, f: f}, nil
}

// openLog opens path for appending, but not through a symbolic link: one in a
// directory others may write would have root append to a file of their
// choosing.
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s: a symbolic link; name the file itself", path)
	}
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	return f, nil
}

func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Write(p)
}

// Reopen opens the file's name again and writes to it from now on: the file
// there now, or a new one. When that fails, the log goes on to the file it
// went to.
func (l *logFile) Reopen() error {
	f, err := openLog(l.path)
	if err != nil {
		return err
	}
	l.mu.Lock()
	old := l.f
	l.f = f
	l.mu.Unlock()
	return old.Close()
}

// Close closes the file.
func (l *logFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}
