package model

// The kinds of a webhook's authentication to its receiver (ReceiverAuth.Type).
const (
	AuthBasic  = "basic"
	AuthOAuth2 = "oauth2"
)

// ReceiverAuth is a webhook's authentication to its receiver as sealed (issue 31, part 2): Basic
// (Username, Password) or an OAuth2 client-credentials grant (TokenURL, ClientID, ClientSecret,
// Scopes, Audience).
type ReceiverAuth struct {
	Type         string   `json:"type"`
	Username     string   `json:"username,omitempty"`
	Password     string   `json:"password,omitempty"`
	TokenURL     string   `json:"tokenUrl,omitempty"`
	ClientID     string   `json:"clientId,omitempty"`
	ClientSecret string   `json:"clientSecret,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`
	Audience     string   `json:"audience,omitempty"`
}

// ReceiverTLS is a webhook's TLS settings toward its receiver as sealed (issue 31, part 3), each a
// PEM text: CACert, a bundle trusted beside the system roots; ClientCert and ClientKey, a client
// certificate (with its chain) and its private key for mutual TLS, both or neither.
type ReceiverTLS struct {
	CACert     string `json:"caCert,omitempty"`
	ClientCert string `json:"clientCert,omitempty"`
	ClientKey  string `json:"clientKey,omitempty"`
}
