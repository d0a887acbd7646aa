package main

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestIdleNeedsProcesses(t *testing.T) {
	if err := idle(context.Background(), config{duration: time.Millisecond}); err == nil {
		t.Fatal("idle ran with no process to watch")
	}
	if err := idle(context.Background(), config{duration: 10 * time.Millisecond, pid: os.Getpid()}); err != nil {
		t.Fatal(err)
	}
}
