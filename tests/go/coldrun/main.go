// Command coldrun runs one program and reports its wall time and peak RSS, for the cold-start
// benchmarks (bench/coldstart.py, bench/node_cold.py).
//
//	coldrun -o RESULT -- PROGRAM ARGS...
//
// Why not measure from the Python harness: Linux carries a process's peak RSS across fork and
// exec (the child starts with its parent's pages counted, and exec keeps the old high-water
// mark), so a child forked by a 25 MiB Python harness reports at least 25 MiB, more than a bare
// interpreter uses. Forked from this small process instead, the child's ru_maxrss is its own.
// The wall time runs from just before the fork until the child has been reaped. stdin, stdout,
// stderr and the environment are the child's, unchanged; RESULT gets one JSON object,
// {"wall_ns", "cpu_ns", "maxrss_kib", "status"} (CPU is user + system; status is the exit code,
// or -1 when a signal ended it),
// and coldrun exits 0 unless it could not run the program at all.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

type result struct {
	WallNs    int64 `json:"wall_ns"`
	CPUNs     int64 `json:"cpu_ns"`
	MaxrssKib int64 `json:"maxrss_kib"`
	Status    int   `json:"status"`
}

func main() {
	output := flag.String("o", "", "file the JSON result is written to")
	flag.Parse()
	if *output == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: coldrun -o RESULT -- PROGRAM ARGS...")
		os.Exit(2)
	}
	command := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	command.Stdin, command.Stdout, command.Stderr = os.Stdin, os.Stdout, os.Stderr
	started := time.Now()
	if err := command.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "coldrun:", err)
		os.Exit(2)
	}
	_ = command.Wait() // a non-zero exit is the child's outcome, recorded below
	wall := time.Since(started)
	usage, _ := command.ProcessState.SysUsage().(*syscall.Rusage)
	measured := result{WallNs: wall.Nanoseconds(), Status: command.ProcessState.ExitCode(),
		CPUNs: (command.ProcessState.UserTime() + command.ProcessState.SystemTime()).Nanoseconds()}
	if usage != nil {
		measured.MaxrssKib = int64(usage.Maxrss)
	}
	encoded, _ := json.Marshal(measured)
	if err := os.WriteFile(*output, encoded, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "coldrun:", err)
		os.Exit(2)
	}
}
