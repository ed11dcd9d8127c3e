// Command shoal runs MPI jobs on clusters whose machines come and go.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }
