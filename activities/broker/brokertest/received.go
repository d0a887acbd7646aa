package brokertest

// Received is one message read back from a broker: its body, its headers or attributes by name,
// and its key (the Kafka record key, the SQS message group; "" where the broker has none).
type Received struct {
	Body    []byte
	Headers map[string]string
	Key     string
}
