package webhooks

import "time"

// SetTrialTime sets how long s's filter trials may work (MaxTrialTime outside tests), so that a
// test reaches the deadline without waiting for it.
func SetTrialTime(s *Service, d time.Duration) { s.trialTime = d }
