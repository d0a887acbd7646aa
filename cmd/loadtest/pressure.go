package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
)

// CPU pressure (issue 27): isolation on a shared host holds only while the CPU has room, so the
// sharedhost scenario can run C's probes beside busy processes that compete with the stack for the
// cores. Each busy process is this binary run again with burnArg alone: it spins on one core until
// it is killed, or until its standard input, a pipe from loadtest, closes. The pipe closes when
// loadtest exits however it exits, SIGKILL included, so no busy process outlives the run.

// burnArg, as the only argument, makes this binary a busy process (main checks it before the
// flags, so it is not one of them: it is not something to run by hand).
const burnArg = "-burn"

// burnRequested reports whether args (os.Args) ask for a busy process.
func burnRequested(args []string) bool {
	return len(args) == 2 && args[1] == burnArg
}

// burn spins on one core until standard input closes, then exits; it never returns.
func burn() {
	go func() {
		//lint:ignore SA5002 spinning on a core is what a busy process is for
		for {
		}
	}()
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// pressure is a set of busy processes.
type pressure struct {
	cmds   []*exec.Cmd
	stdins []io.WriteCloser
}

// startPressure starts n busy processes. The caller ends them with stop, also on errors.
func startPressure(n int) (*pressure, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("busy processes: this binary: %w", err)
	}
	p := &pressure{}
	for range n {
		cmd := exec.Command(exe, burnArg)
		in, err := cmd.StdinPipe()
		if err != nil {
			p.stop()
			return nil, fmt.Errorf("busy process: %w", err)
		}
		if err := cmd.Start(); err != nil { // Start closes the pipe when it fails
			p.stop()
			return nil, fmt.Errorf("busy process: %w", err)
		}
		p.cmds = append(p.cmds, cmd)
		p.stdins = append(p.stdins, in)
	}
	return p, nil
}

// pids are the busy processes' ids.
func (p *pressure) pids() []int {
	var pids []int
	for _, c := range p.cmds {
		pids = append(pids, c.Process.Pid)
	}
	return pids
}

// stop kills the busy processes and waits for them to end.
func (p *pressure) stop() {
	for _, c := range p.cmds {
		_ = c.Process.Kill() // an error means it has ended already
	}
	for _, c := range p.cmds {
		_ = c.Wait() // "signal: killed", as asked
	}
	p.cmds, p.stdins = nil, nil
}
