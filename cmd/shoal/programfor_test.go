package main

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeELF writes the header of a 64-bit little-endian executable for machine,
// which is all programArch reads.
func writeELF(t *testing.T, dir, name string, machine elf.Machine) string {
	t.Helper()
	h := make([]byte, 64)
	copy(h, elf.ELFMAG)
	h[elf.EI_CLASS], h[elf.EI_DATA], h[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	binary.LittleEndian.PutUint16(h[16:], uint16(elf.ET_EXEC))
	binary.LittleEndian.PutUint16(h[18:], uint16(machine))
	binary.LittleEndian.PutUint32(h[20:], uint32(elf.EV_CURRENT))
	binary.LittleEndian.PutUint16(h[52:], 64) // e_ehsize
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, h, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestProgramArch(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o755)
	tests := []struct {
		path, want, err string
	}{
		{writeELF(t, dir, "x86", elf.EM_X86_64), "amd64", ""},
		{writeELF(t, dir, "arm", elf.EM_AARCH64), "arm64", ""},
		{writeELF(t, dir, "vax", elf.EM_VAX), "", "an ELF program for EM_VAX, an instruction set Shoal does not know"},
		{script, "", errNotELF.Error()},
	}
	for _, tt := range tests {
		got, err := programArch(tt.path)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && err.Error() != tt.err) {
			t.Errorf("programArch(%s) = %q, %v; want %q, %q", filepath.Base(tt.path), got, err, tt.want, tt.err)
		}
	}
}

func TestProgramBuilds(t *testing.T) {
	dir := t.TempDir()
	x86 := writeELF(t, dir, "heat", elf.EM_X86_64)
	arm := writeELF(t, dir, "heat-arm", elf.EM_AARCH64)
	script := filepath.Join(dir, "heat.py")
	os.WriteFile(script, []byte("print(1)\n"), 0o644)
	tests := []struct {
		name    string
		flags   []string
		program string
		main    string
		err     string
	}{
		{"none", nil, x86, "amd64", ""},
		{"a build for arm64", []string{"arm64=" + arm}, x86, "amd64", ""},
		{"a build of the wrong set", []string{"arm64=" + x86}, x86, "amd64", "--program-for arm64=" + x86 + ": a program built for amd64"},
		{"a build for this machine's set", []string{"amd64=" + x86}, x86, "amd64", "--program-for amd64=" + x86 + ": " + x86 + " is built for amd64 already"},
		{"a script as the build", []string{"arm64=" + script}, x86, "amd64", "--program-for arm64=" + script + ": not an ELF program"},
		{"a build of a script", []string{"arm64=" + arm}, script, "", "--program-for: " + script + " is not a program built for an instruction set (a script runs as it is on every node)"},
		{"a missing build", []string{"arm64=" + dir + "/nothing"}, x86, "amd64", "--program-for arm64=" + dir + "/nothing: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var flag programForFlag
			for _, v := range tt.flags {
				if err := flag.Set(v); err != nil {
					t.Fatal(err)
				}
			}
			_, err := programBuilds(flag, tt.program, tt.main)
			if (err == nil) != (tt.err == "") || (err != nil && !strings.HasPrefix(err.Error(), tt.err)) {
				t.Errorf("programBuilds = %v, want %q", err, tt.err)
			}
		})
	}
	var flag programForFlag
	for v, want := range map[string]string{"arm64": "want ARCH=PATH (arm64=build/arm64/examples/heat), not \"arm64\"", "=x": "want ARCH=PATH (arm64=build/arm64/examples/heat), not \"=x\""} {
		if err := flag.Set(v); err == nil || err.Error() != want {
			t.Errorf("Set(%q) = %v, want %q", v, err, want)
		}
	}
	flag.Set("arm64=a")
	if err := flag.Set("arm64=b"); err == nil || err.Error() != "a build for arm64 given twice" {
		t.Errorf("a second build for arm64: %v", err)
	}
}
