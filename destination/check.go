package destination

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The bounds of a destination's text members.
const (
	maxMemberBytes = 255
	maxSecretBytes = 4 << 10
	maxBrokers     = 16
)

// request is a destination object as sent.
type request struct {
	Type            *string `json:"type"`
	Subject         *string `json:"subject"`
	Exchange        *string `json:"exchange"`
	RoutingKey      *string `json:"routingKey"`
	Topic           *string `json:"topic"`
	Region          *string `json:"region"`
	AccessKeyID     *string `json:"accessKeyId"`
	MessageGroupID  *string `json:"messageGroupId"`
	Token           *string `json:"token"`
	SecretAccessKey *string `json:"secretAccessKey"`
	SessionToken    *string `json:"sessionToken"`
}

// Parse reads a destination object as sent (not null). A refusal is an *Error.
func Parse(raw json.RawMessage) (Settings, Credentials, error) {
	var req request
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) && typ.Field != "" {
			return Settings{}, Credentials{}, malformed("destination."+typ.Field, "destination.%s must be a string", typ.Field)
		}
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return Settings{}, Credentials{}, malformed("destination", "destination has an unknown member %s", clip(field))
		}
		return Settings{}, Credentials{}, malformed("destination", `destination must be an object such as {"type": "nats", "subject": "orders"}, or null`)
	}
	str := func(v *string) string {
		if v == nil {
			return ""
		}
		return strings.TrimSpace(*v)
	}
	s := Settings{
		Type: str(req.Type), Subject: str(req.Subject), Exchange: str(req.Exchange), RoutingKey: str(req.RoutingKey),
		Topic: str(req.Topic), Region: str(req.Region), AccessKeyID: str(req.AccessKeyID), MessageGroupID: str(req.MessageGroupID),
	}
	c := Credentials{Token: str(req.Token), SecretAccessKey: str(req.SecretAccessKey), SessionToken: str(req.SessionToken)}
	if req.Type == nil {
		return s, c, malformed("destination.type", "destination.type is required, one of %v", Types)
	}
	if !slices.Contains(Types, s.Type) {
		return s, c, invalid("destination.type", "destination.type must be one of %v", Types)
	}
	// Each kind takes its own members: another kind's is a mistake worth naming.
	own := Members[s.Type]
	given := map[string]*string{
		"subject": req.Subject, "exchange": req.Exchange, "routingKey": req.RoutingKey, "topic": req.Topic,
		"region": req.Region, "accessKeyId": req.AccessKeyID, "messageGroupId": req.MessageGroupID,
		"token": req.Token, "secretAccessKey": req.SecretAccessKey, "sessionToken": req.SessionToken,
	}
	for _, name := range sortedKeys(given) {
		if given[name] != nil && !slices.Contains(own, name) {
			return s, c, malformed("destination."+name, "destination.%s is not a member of a %s destination; it takes %s", name, s.Type, strings.Join(own, ", "))
		}
	}
	for name, v := range map[string]string{"subject": s.Subject, "exchange": s.Exchange, "routingKey": s.RoutingKey,
		"topic": s.Topic, "region": s.Region, "accessKeyId": s.AccessKeyID, "messageGroupId": s.MessageGroupID} {
		if len(v) > maxMemberBytes {
			return s, c, invalid("destination."+name, "destination.%s is longer than %d bytes", name, maxMemberBytes)
		}
	}
	for name, v := range map[string]string{"token": c.Token, "secretAccessKey": c.SecretAccessKey, "sessionToken": c.SessionToken} {
		if len(v) > maxSecretBytes {
			return s, c, invalid("destination."+name, "destination.%s is longer than %d bytes", name, maxSecretBytes)
		}
	}
	switch s.Type {
	case NATS:
		if s.Subject == "" {
			return s, c, malformed("destination.subject", "destination.subject is required: the JetStream subject events are published to")
		}
		if !natsSubject.MatchString(s.Subject) {
			return s, c, invalid("destination.subject", "destination.subject must be a NATS subject of tokens separated by dots, without spaces or wildcards (* and >)")
		}
	case RabbitMQ:
		if s.Exchange == "" && s.RoutingKey == "" {
			return s, c, malformed("destination.routingKey", "destination.routingKey is required with the default exchange: it names the queue")
		}
		if s.Exchange != "" && !amqpName.MatchString(s.Exchange) {
			return s, c, invalid("destination.exchange", "destination.exchange may hold letters, digits, hyphens, underscores, periods and colons")
		}
	case Kafka:
		if s.Topic == "" {
			return s, c, malformed("destination.topic", "destination.topic is required")
		}
		if !kafkaTopic.MatchString(s.Topic) || s.Topic == "." || s.Topic == ".." {
			return s, c, invalid("destination.topic", "destination.topic may hold letters, digits, periods, underscores and hyphens, at most 249")
		}
	case SQS:
		if s.AccessKeyID == "" || c.SecretAccessKey == "" {
			field := "destination.accessKeyId"
			if s.AccessKeyID != "" {
				field = "destination.secretAccessKey"
			}
			return s, c, malformed(field, "destination.accessKeyId and destination.secretAccessKey are required: the AWS credentials that may send to the queue")
		}
		if s.Region != "" && !awsRegion.MatchString(s.Region) {
			return s, c, invalid("destination.region", "destination.region must be an AWS region such as us-east-1")
		}
		if s.MessageGroupID != "" && !sqsGroup.MatchString(s.MessageGroupID) {
			return s, c, invalid("destination.messageGroupId", "destination.messageGroupId may hold at most 128 letters, digits and punctuation")
		}
	}
	return s, c, nil
}

var (
	natsSubject = regexp.MustCompile(`^[^.\s*>]+(\.[^.\s*>]+)*$`)
	amqpName    = regexp.MustCompile(`^[A-Za-z0-9_.:\-]+$`)
	kafkaTopic  = regexp.MustCompile(`^[A-Za-z0-9._\-]{1,249}$`)
	awsRegion   = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d$`)
	sqsGroup    = regexp.MustCompile(`^[\x21-\x7e]{1,128}$`)
)

// Schemes are the URL schemes of each kind: the plaintext one first, then the TLS one.
var Schemes = map[string][2]string{
	NATS:     {"nats", "tls"},
	RabbitMQ: {"amqp", "amqps"},
	Kafka:    {"kafka", "kafka+tls"},
	SQS:      {"http", "https"},
}

// DefaultPorts are each scheme's port when the URL names none.
var DefaultPorts = map[string]string{"nats": "4222", "tls": "4222", "amqp": "5672", "amqps": "5671", "kafka": "9092", "kafka+tls": "9093", "http": "80", "https": "443"}

// CheckURL judges url as the address of a destination of settings' kind: its scheme (the
// plaintext one only with allowPlaintext, WEBHOOKD_ALLOW_HTTP_TARGETS), its hosts and ports, and
// its user. It returns the URL as stored (its password taken out into the credentials) and the
// hosts the address policy judges next.
func CheckURL(raw string, s Settings, allowPlaintext bool) (stored string, user Credentials, hosts []string, err error) {
	schemes := Schemes[s.Type]
	scheme, rest, ok := strings.Cut(raw, "://")
	scheme = strings.ToLower(scheme)
	if !ok || (scheme != schemes[0] && scheme != schemes[1]) {
		return "", user, nil, invalid("url", "url of a %s destination must start with %s://%s", s.Type, schemes[1], plaintextNote(schemes[0], allowPlaintext))
	}
	if scheme == schemes[0] && !allowPlaintext {
		return "", user, nil, invalid("url", "url must use %s:// (TLS); %s:// is allowed only where plaintext targets are switched on", schemes[1], schemes[0])
	}
	if s.Type == Kafka {
		// kafka://[user[:password]@]host:port[,host:port...]: a list of brokers, which net/url
		// does not parse.
		return checkKafkaURL(scheme, rest)
	}
	u, perr := url.Parse(raw)
	if perr != nil || u.Host == "" || u.Opaque != "" {
		return "", user, nil, invalid("url", "url is not a valid %s URL such as %s://host:%s", s.Type, schemes[1], DefaultPorts[schemes[1]])
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return "", user, nil, invalid("url", "url must not contain a fragment")
	}
	host, err := hostPort(u.Host, scheme)
	if err != nil {
		return "", user, nil, err
	}
	switch s.Type {
	case NATS, Kafka:
		if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
			return "", user, nil, invalid("url", "url of a %s destination is %s://host:port, without a path or query", s.Type, schemes[1])
		}
	case RabbitMQ:
		if u.RawQuery != "" {
			return "", user, nil, invalid("url", "url of a rabbitmq destination takes no query")
		}
	case SQS:
		if u.User != nil {
			return "", user, nil, invalid("url", "url must not contain credentials; an sqs destination takes accessKeyId and secretAccessKey")
		}
		if u.RawQuery != "" || strings.Count(strings.Trim(u.Path, "/"), "/") != 1 {
			return "", user, nil, invalid("url", "url of an sqs destination is the queue URL, https://sqs.<region>.amazonaws.com/<account>/<queue>")
		}
	}
	if u.User != nil {
		user.Username = u.User.Username()
		user.Password, _ = u.User.Password()
		if user.Username == "" && user.Password != "" {
			return "", Credentials{}, nil, invalid("url", "url has a password without a user")
		}
		if len(user.Username) > maxMemberBytes || len(user.Password) > maxSecretBytes {
			return "", Credentials{}, nil, invalid("url", "url's user or password is too long")
		}
		u.User = url.User(user.Username)
		if user.Username == "" {
			u.User = nil
		}
	}
	return u.String(), user, []string{host}, nil
}

// Region is the AWS region of an SQS destination: its setting, else the one its queue URL's host
// names (sqs.<region>.amazonaws.com), else "".
func Region(s Settings, queueURL string) string {
	if s.Region != "" {
		return s.Region
	}
	u, err := url.Parse(queueURL)
	if err != nil {
		return ""
	}
	labels := strings.Split(u.Hostname(), ".")
	if len(labels) >= 4 && labels[0] == "sqs" && awsRegion.MatchString(labels[1]) {
		return labels[1]
	}
	return ""
}

func checkKafkaURL(scheme, rest string) (string, Credentials, []string, error) {
	var user Credentials
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		info, err := url.PathUnescape(rest[:at])
		if err != nil {
			return "", user, nil, invalid("url", "url's user is not valid")
		}
		user.Username, user.Password, _ = strings.Cut(info, ":")
		if user.Username == "" || len(user.Username) > maxMemberBytes || len(user.Password) > maxSecretBytes {
			return "", Credentials{}, nil, invalid("url", "url's user is empty or too long")
		}
		rest = rest[at+1:]
	}
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" || strings.ContainsAny(rest, "/?#") {
		return "", user, nil, invalid("url", "url of a kafka destination is kafka+tls://host:port[,host:port...], without a path or query")
	}
	parts := strings.Split(rest, ",")
	if len(parts) > maxBrokers {
		return "", user, nil, invalid("url", "url names more than %d brokers", maxBrokers)
	}
	var hosts []string
	for _, p := range parts {
		h, err := hostPort(p, scheme)
		if err != nil {
			return "", user, nil, err
		}
		hosts = append(hosts, h)
	}
	stored := scheme + "://"
	if user.Username != "" {
		stored += url.PathEscape(user.Username) + "@"
	}
	return stored + strings.Join(hosts, ","), user, hosts, nil
}

// hostPort is one broker's host:port, the scheme's port filled in.
func hostPort(hp, scheme string) (string, error) {
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		host, port = strings.Trim(hp, "[]"), DefaultPorts[scheme]
	}
	if host == "" {
		return "", invalid("url", "url must name a host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", invalid("url", "url port must be a number from 1 to 65535")
	}
	return net.JoinHostPort(strings.ToLower(host), port), nil
}

func plaintextNote(plain string, allowed bool) string {
	if allowed {
		return " or " + plain + "://"
	}
	return ""
}

func malformed(field, format string, args ...any) *Error {
	return &Error{Field: field, Reason: fmt.Sprintf(format, args...), Malformed: true}
}

func invalid(field, format string, args ...any) *Error {
	return &Error{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// clip shortens a name quoted from a request.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
