// Package dirsync makes a directory's entries durable: after a file is created,
// renamed into a directory or removed from it, the change survives a crash only
// once the directory itself is synced.
package dirsync

import "os"

// Sync fsyncs the directory dir.
func Sync(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
