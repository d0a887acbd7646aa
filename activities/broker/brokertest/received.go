package brokertest

type Received struct {
	Body    []byte
	Headers map[string]string
	Key     string
}
