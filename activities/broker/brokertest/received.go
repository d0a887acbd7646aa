package brokertest

// Received is one message as a consumer took it from a broker: its body byte for byte, its
// headers or attributes by name, and its key (a Kafka record's key, an SQS FIFO message's group).
type Received struct {
	Body    []byte
	Headers map[string]string
	Key     string
}
