package main

import (
	"testing"
	"time"
)

// TestPressureBurnsACoreUntilStopped: a busy process spends CPU time, and stop ends it.
func TestPressureBurnsACoreUntilStopped(t *testing.T) {
	p, err := startPressure(1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	procs := []cpuProcess{{name: "busy", pids: []int{p.pids()[0]}}}
	before := readCPU(procs)
	if _, ok := before["busy"]; !ok {
		t.Fatal("the busy process's CPU time was not read")
	}
	// 200 ms of CPU: far more than a process waiting on its standard input spends, and soon
	// reached even on a loaded machine.
	for deadline := time.Now().Add(20 * time.Second); readCPU(procs)["busy"]-before["busy"] < 200*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatalf("the busy process spent %s of CPU in 20 s", readCPU(procs)["busy"]-before["busy"])
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd := p.cmds[0]
	p.stop()
	if cmd.ProcessState == nil {
		t.Fatal("stop returned before the busy process ended")
	}
}

// TestPressureEndsWithItsParent: a busy process whose standard input closes (loadtest has exited,
// however) ends by itself.
func TestPressureEndsWithItsParent(t *testing.T) {
	p, err := startPressure(1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	if err := p.stdins[0].Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	cmd := p.cmds[0]
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the busy process ended with %v, want exit status 0", err)
		}
		p.cmds = nil // waited for
	case <-time.After(10 * time.Second):
		t.Fatal("the busy process still runs 10 s after its standard input closed")
	}
}

func TestBurnRequestedOnlyAlone(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"loadtest", burnArg}, true},
		{[]string{"loadtest"}, false},
		{[]string{"loadtest", burnArg, "-scenario", "sharedhost"}, false},
		{[]string{"loadtest", "-scenario", "sharedhost"}, false},
	} {
		if got := burnRequested(tc.args); got != tc.want {
			t.Errorf("burnRequested(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
