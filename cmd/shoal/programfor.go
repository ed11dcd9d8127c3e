package main

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// elfArches are the instruction sets Go names, by an ELF file's machine (and
// byte order, where a machine has two).
var elfArches = map[elf.Machine]string{
	elf.EM_X86_64:    "amd64",
	elf.EM_AARCH64:   "arm64",
	elf.EM_386:       "386",
	elf.EM_ARM:       "arm",
	elf.EM_RISCV:     "riscv64",
	elf.EM_S390:      "s390x",
	elf.EM_PPC64:     "ppc64le",
	elf.EM_LOONGARCH: "loong64",
}

// errNotELF is a program that is no ELF file: a script, which runs on any
// instruction set its interpreter does.
var errNotELF = errors.New("not an ELF program")

// programArch is the instruction set program is built for, as Go names it
// (amd64, arm64), or errNotELF.
func programArch(program string) (string, error) {
	r, err := os.Open(program)
	if err != nil {
		return "", err
	}
	defer r.Close()
	magic := make([]byte, len(elf.ELFMAG))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != elf.ELFMAG {
		return "", errNotELF
	}
	f, err := elf.NewFile(r)
	if err != nil {
		return "", err
	}
	defer f.Close()
	arch, ok := elfArches[f.Machine]
	if !ok {
		return "", fmt.Errorf("an ELF program for %s, an instruction set Shoal does not know", f.Machine)
	}
	if f.Machine == elf.EM_PPC64 && f.ByteOrder.String() != "LittleEndian" {
		arch = "ppc64"
	}
	return arch, nil
}

// programForFlag is --program-for ARCH=PATH, repeatable: a build of the job's
// program for another instruction set.
type programForFlag map[string]string

func (p *programForFlag) String() string {
	var parts []string
	for arch, path := range *p {
		parts = append(parts, arch+"="+path)
	}
	return strings.Join(parts, ",")
}

func (p *programForFlag) Set(v string) error {
	arch, path, ok := strings.Cut(v, "=")
	if !ok || arch == "" || path == "" {
		return fmt.Errorf("want ARCH=PATH (arm64=build/arm64/examples/heat), not %q", v)
	}
	if *p == nil {
		*p = programForFlag{}
	}
	if _, dup := (*p)[arch]; dup {
		return fmt.Errorf("a build for %s given twice", arch)
	}
	(*p)[arch] = path
	return nil
}

// programBuilds checks the builds of --program-for against the program of this
// machine (its instruction set main, "" for a script) and returns them by
// instruction set.
func programBuilds(builds programForFlag, program, main string) (map[string]string, error) {
	if len(builds) == 0 {
		return nil, nil
	}
	if main == "" {
		return nil, fmt.Errorf("--program-for: %s is not a program built for an instruction set (a script runs as it is on every node)", program)
	}
	for arch, path := range builds {
		got, err := programArch(path)
		switch {
		case errors.Is(err, errNotELF):
			return nil, fmt.Errorf("--program-for %s=%s: not an ELF program", arch, path)
		case err != nil:
			return nil, fmt.Errorf("--program-for %s=%s: %s", arch, path, errorLine(err))
		case got != arch:
			return nil, fmt.Errorf("--program-for %s=%s: a program built for %s", arch, path, got)
		case arch == main:
			return nil, fmt.Errorf("--program-for %s=%s: %s is built for %s already", arch, path, program, main)
		}
		if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o111 == 0 {
			return nil, fmt.Errorf("--program-for %s=%s: not executable", arch, path)
		}
	}
	return builds, nil
}
