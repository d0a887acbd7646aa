package broker

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/schemas"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/aws/smithy-go/transport/http/protocol/awsquery"
)

// The bounds SQS sets on a message's attributes (docs/destinations.md): at most 10, each name of
// letters, digits, '-', '_' and '.', at most 256 characters, no leading, trailing or doubled '.',
// and no "AWS." or "Amazon." prefix. A FIFO queue's group id is at most 128 characters of ASCII
// letters, digits and punctuation.
const (
	sqsMaxAttributes = 10
	sqsMaxName       = 256
	sqsMaxGroupID    = 128
	// sqsMaxAnswer bounds what is read of an answer: SQS's are a few hundred bytes, and the queue
	// URL is the customer's choice, so its server may send anything.
	sqsMaxAnswer = 64 << 10
)

// sqsPublisher sends each message with SendMessage, which SQS answers only once it stored the
// message redundantly: that answer is the durable acknowledgement. Its connections are the egress
// HTTP client's (Target.HTTP), shared with every delivery and reused between publishes.
type sqsPublisher struct {
	client   *sqs.Client
	queueURL string
	fifo     bool
	// group is the FIFO queue's message group of a message without an ordering key
	// (Settings.MessageGroupID); "" uses the message's DedupID, one group per delivery.
	group  string
	closed atomic.Bool
}

// OpenSQS builds the Publisher of an SQS queue. t.URL is the queue URL
// (https://sqs.<region>.amazonaws.com/<account>/<name>); the region is Settings.Region, or the
// one the host names. The credentials are Settings.AccessKeyID with Credentials.SecretAccessKey
// (and SessionToken), and nothing else: no environment, no ~/.aws, no instance metadata. Requests
// go through t.HTTP. Open makes no request, so a queue that is down or missing fails the first
// Publish, not Open.
//
// The client speaks SQS's query protocol (form-encoded POST, XML answers), which SQS serves beside
// AWS JSON 1.0, the SDK's default: goaws, the SQS that the tests run (brokertest), speaks only the
// query protocol, and so the protocol webhookd speaks to AWS is the one its tests speak.
func OpenSQS(ctx context.Context, t Target) (Publisher, error) {
	u, err := url.Parse(t.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("sqs: the url must be the queue's URL, https://sqs.<region>.amazonaws.com/<account>/<queue>")
	}
	name := u.Path[strings.LastIndex(u.Path, "/")+1:]
	if name == "" {
		return nil, errors.New("sqs: the queue URL names no queue (https://sqs.<region>.amazonaws.com/<account>/<queue>)")
	}
	region := t.Settings.Region
	if region == "" {
		region = regionOfHost(u.Hostname())
	}
	if region == "" {
		return nil, errors.New("sqs: region is required: the queue URL's host names none")
	}
	if t.Settings.AccessKeyID == "" || t.Credentials.SecretAccessKey == "" {
		return nil, errors.New("sqs: accessKeyId and secretAccessKey are required")
	}
	if t.HTTP == nil {
		return nil, errors.New("sqs: no HTTP client")
	}
	client := sqs.New(sqs.Options{
		Region:       region,
		BaseEndpoint: aws.String(u.Scheme + "://" + u.Host),
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(
			t.Settings.AccessKeyID, t.Credentials.SecretAccessKey, t.Credentials.SessionToken)),
		HTTPClient: sqsHTTP{t.HTTP},
		// One request per Publish: the delivery's own schedule retries, and each attempt is
		// counted, classified and logged as such. The SDK's retries would hide failures from the
		// breakers and, on a standard queue, could store a message twice within one attempt.
		Retryer:                          aws.NopRetryer{},
		DisableMessageChecksumValidation: true,
	}, func(o *sqs.Options) {
		o.Protocol = awsquery.New(schemas.AmazonSQS)
	})
	return &sqsPublisher{
		client:   client,
		queueURL: t.URL,
		fifo:     strings.HasSuffix(name, ".fifo"),
		group:    t.Settings.MessageGroupID,
	}, nil
}

// regionOfHost is the region an SQS host names: sqs.<region>.amazonaws.com (and .com.cn),
// <region>.queue.amazonaws.com, the VPC endpoints' ...sqs.<region>.vpce.amazonaws.com; "" for a
// host that names none.
func regionOfHost(host string) string {
	labels := strings.Split(strings.ToLower(host), ".")
	for i, l := range labels {
		if l == "sqs" && i+2 < len(labels) && labels[i+2] == "amazonaws" {
			return labels[i+1]
		}
		if l == "sqs" && i+3 < len(labels) && labels[i+2] == "vpce" && labels[i+3] == "amazonaws" {
			return labels[i+1]
		}
		if l == "queue" && i == 1 && len(labels) >= 4 && labels[2] == "amazonaws" {
			return labels[0]
		}
	}
	return ""
}

// Publish sends m with SendMessage. Each header is a String message attribute of the same name
// (webhook-id, webhook-signature... are valid SQS attribute names); a header with an empty value
// is left out, since SQS refuses empty attributes. On a FIFO queue, MessageDeduplicationId is
// m.DedupID and MessageGroupId is m.OrderingKey, else the destination's group, else m.DedupID. A
// standard queue has no de-duplication: a message sent again (a retry after a lost answer) is
// stored again, and the consumer tells them apart by the webhook-id attribute.
func (p *sqsPublisher) Publish(ctx context.Context, m Message) error {
	if p.closed.Load() {
		return errors.New("sqs: publisher closed")
	}
	attrs, err := sqsAttributes(m.Headers)
	if err != nil {
		return err
	}
	in := &sqs.SendMessageInput{
		QueueUrl:          aws.String(p.queueURL),
		MessageBody:       aws.String(string(m.Body)),
		MessageAttributes: attrs,
	}
	if p.fifo {
		group := m.OrderingKey
		if group == "" {
			group = p.group
		}
		if group == "" {
			group = m.DedupID
		}
		in.MessageGroupId = aws.String(sqsGroupID(group))
		in.MessageDeduplicationId = aws.String(sqsGroupID(m.DedupID))
	}
	out, err := p.client.SendMessage(ctx, in)
	if err != nil {
		return sqsError(err)
	}
	// SQS's answer always has both (the SDK checks the digest only when there is one, so the
	// client leaves the check to this).
	sum := md5.Sum(m.Body)
	if out.MessageId == nil || aws.ToString(out.MD5OfMessageBody) != hex.EncodeToString(sum[:]) {
		return &Refusal{Class: ClassBrokerRefused, Message: "the queue URL's answer has no message id, or not the MD5 digest of the body sent: not SQS's"}
	}
	return nil
}

// Close stops the Publisher: a later Publish fails. The connections belong to the egress client,
// which every delivery shares, and its idle timeout closes them.
func (p *sqsPublisher) Close() error {
	p.closed.Store(true)
	return nil
}

// sqsAttributes are headers as String message attributes, or a Refusal naming the header SQS
// would refuse (its name only: a header's value may be a secret).
func sqsAttributes(headers map[string]string) (map[string]types.MessageAttributeValue, error) {
	names := make([]string, 0, len(headers))
	for name, value := range headers {
		if value != "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if len(names) > sqsMaxAttributes {
		return nil, &Refusal{Class: ClassBrokerRefused, Message: fmt.Sprintf(
			"SQS takes at most %d message attributes, and this message has %d headers: %s",
			sqsMaxAttributes, len(names), strings.Join(names, ", "))}
	}
	attrs := make(map[string]types.MessageAttributeValue, len(names))
	for _, name := range names {
		if why := sqsNameRefusal(name); why != "" {
			return nil, &Refusal{Class: ClassBrokerRefused, Message: fmt.Sprintf(
				"SQS refuses the header name %q as a message attribute: %s", name, why)}
		}
		attrs[name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(headers[name])}
	}
	return attrs, nil
}

// sqsNameRefusal says why SQS refuses name as a message attribute's, "" when it takes it.
func sqsNameRefusal(name string) string {
	switch lower := strings.ToLower(name); {
	case len(name) > sqsMaxName:
		return fmt.Sprintf("longer than %d characters", sqsMaxName)
	case strings.HasPrefix(lower, "aws.") || strings.HasPrefix(lower, "amazon."):
		return `names starting with "AWS." or "Amazon." are reserved`
	case strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, ".."):
		return "a '.' may not start or end a name, nor follow another"
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return "only letters, digits, '-', '_' and '.' are allowed"
		}
	}
	return ""
}

// sqsGroupID is s as a FIFO group or de-duplication id: itself when SQS takes it (at most 128
// printable ASCII characters, no space), else "sha256-" and its SHA-256 in hex, so that one key
// is always one group.
func sqsGroupID(s string) string {
	ok := s != "" && len(s) <= sqsMaxGroupID
	for i := 0; ok && i < len(s); i++ {
		ok = s[i] > ' ' && s[i] < 0x7f
	}
	if ok {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + hex.EncodeToString(sum[:])
}

// The error codes of SQS's answers, by class: query protocol codes and their AWS JSON names.
var (
	sqsMissing = map[string]bool{
		"AWS.SimpleQueueService.NonExistentQueue":      true,
		"QueueDoesNotExist":                            true,
		"AWS.SimpleQueueService.QueueDeletedRecently":  true,
		"QueueDeletedRecently":                         true,
		"AWS.SimpleQueueService.NonExistentQueueOwner": true,
	}
	sqsAuth = map[string]bool{
		"InvalidClientTokenId":         true,
		"UnrecognizedClientException":  true,
		"SignatureDoesNotMatch":        true,
		"IncompleteSignature":          true,
		"MissingAuthenticationToken":   true,
		"InvalidAccessKeyId":           true,
		"AccessDenied":                 true,
		"AccessDeniedException":        true,
		"ExpiredToken":                 true,
		"ExpiredTokenException":        true,
		"InvalidSecurity":              true,
		"KMS.AccessDeniedException":    true,
		"KmsAccessDenied":              true,
		"KMS.DisabledException":        true,
		"KmsDisabled":                  true,
		"KMS.InvalidKeyUsageException": true,
		"KmsInvalidKeyUsage":           true,
		"KMS.NotFoundException":        true,
		"KmsNotFound":                  true,
		"RequestExpired":               true,
	}
	sqsBusy = map[string]bool{
		"RequestThrottled":                 true,
		"ThrottlingException":              true,
		"Throttling":                       true,
		"KMS.ThrottlingException":          true,
		"KmsThrottled":                     true,
		"OverLimit":                        true,
		"AWS.SimpleQueueService.OverLimit": true,
		"ServiceUnavailable":               true,
		"InternalFailure":                  true,
		"InternalError":                    true,
	}
)

// sqsError is err as Publish returns it: a *Refusal when SQS answered, the network error (wrapped
// with %w, so that egress.Classify reads it) when it was not reached. A Refusal's Message names
// SQS's error code and request id, never SQS's own text, which may echo the request (a header's
// value, the canonical request of a signature and its session token).
func sqsError(err error) error {
	var api smithy.APIError
	var resp *awshttp.ResponseError
	status := 0
	requestID := ""
	if errors.As(err, &resp) {
		status, requestID = resp.HTTPStatusCode(), resp.ServiceRequestID()
	}
	if errors.Is(err, errSQSAnswerTooLarge) {
		return &Refusal{Class: ClassBrokerRefused, Message: errSQSAnswerTooLarge.Error(), Err: errSQSAnswerTooLarge}
	}
	if errors.As(err, &api) {
		code := api.ErrorCode()
		r := &Refusal{Class: ClassBrokerRefused, Err: sqsAnswer{code: code, status: status, requestID: requestID}}
		switch {
		case sqsMissing[code]:
			r.Class, r.Message = ClassBrokerMissing, "the SQS queue does not exist"
		case sqsAuth[code]:
			r.Class, r.Message = ClassBrokerAuth, "SQS refused the credentials or the permission to send to the queue"
		case sqsBusy[code] || status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
			r.Busy, r.Message = true, "SQS is throttling or unavailable"
		case status >= 500:
			r.Message = "SQS failed to take the message"
		default:
			r.Message = "SQS refused the message"
		}
		r.Message += " (" + r.Err.Error() + ")"
		return r
	}
	if status != 0 {
		// Reached, with an answer that is not SQS's (a load balancer's page, another server).
		a := sqsAnswer{status: status, requestID: requestID}
		return &Refusal{Class: ClassBrokerRefused, Busy: status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests,
			Message: "the queue URL answered without an SQS error (" + a.Error() + ")", Err: a}
	}
	var send *smithyhttp.RequestSendError
	if errors.As(err, &send) {
		return fmt.Errorf("sqs: %w", send.Err)
	}
	return fmt.Errorf("sqs: %w", err)
}

// errSQSAnswerTooLarge ends the read of an answer beyond sqsMaxAnswer.
var errSQSAnswerTooLarge = fmt.Errorf("the queue URL's answer exceeded %d KiB: not SQS", sqsMaxAnswer>>10)

// sqsHTTP is Target.HTTP with every answer's body bounded by sqsMaxAnswer.
type sqsHTTP struct{ c *http.Client }

func (h sqsHTTP) Do(r *http.Request) (*http.Response, error) {
	resp, err := h.c.Do(r)
	if err == nil {
		resp.Body = &boundedBody{ReadCloser: resp.Body, left: sqsMaxAnswer}
	}
	return resp, err
}

// boundedBody fails a read past its bound with errSQSAnswerTooLarge.
type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errSQSAnswerTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left+1] // one more byte tells a body of exactly the bound from a longer one
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, errSQSAnswerTooLarge
	}
	return n, err
}

// sqsAnswer is SQS's error answer as a Refusal keeps it: its code, status and request id only.
type sqsAnswer struct {
	code      string
	status    int
	requestID string
}

func (a sqsAnswer) Error() string {
	parts := []string{}
	if a.code != "" {
		parts = append(parts, a.code)
	}
	if a.status != 0 {
		parts = append(parts, fmt.Sprintf("HTTP %d", a.status))
	}
	if a.requestID != "" {
		parts = append(parts, "request id "+a.requestID)
	}
	return strings.Join(parts, ", ")
}
