// Package brokertest starts real message brokers for the tests of activities/broker and the
// system tests, one file per kind, and reads back what a Publisher published into them.
package brokertest

// Received is one message as a broker's consumer read it: its body, its headers (or attributes)
// by name, and its key (a Kafka record's key, "" for none).
type Received struct {
	Body    []byte
	Headers map[string]string
	Key     string
}
