// Package brokertest runs real message brokers for the tests of activities/broker and the system
// tests: each kind's broker as a process of its own on a free loopback port, which a test can kill
// with SIGKILL and restart on the same port with its data; the stream, exchange, topic or queue a
// destination publishes to; and a consumer that reads back what was published.
package brokertest
