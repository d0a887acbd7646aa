package webhooks

import "time"

// SetTrialTime sets how long s's filter trials may work (MaxTrialTime outside tests), so that a
// test reaches the deadline without waiting for it.
func SetTrialTime(s *Service, d time.Duration) { s.trialTime = d }

// SetReplayMatchTime sets how long s's replays' matches may work (MaxReplayMatchTime outside
// tests).
func SetReplayMatchTime(s *Service, d time.Duration) { s.replayMatchTime = d }

// SetReplayMatchBytes sets the event data s's replays' matches may read (MaxReplayMatchBytes
// outside tests), so that a test passes it with a few events.
func SetReplayMatchBytes(s *Service, n int) { s.replayMatchBytes = n }
