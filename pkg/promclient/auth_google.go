package promclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

// GoogleMonitoringReadScope is the OAuth2 scope of Google Cloud Managed
// Service for Prometheus' query API.
const GoogleMonitoringReadScope = "https://www.googleapis.com/auth/monitoring.read"

// GoogleConfig authenticates to Google Cloud Managed Service for
// Prometheus with OAuth2 tokens from golang.org/x/oauth2/google.
type GoogleConfig struct {
	// CredentialsFile is a credentials JSON file: a service account key,
	// an external account (workload identity federation), an impersonated
	// service account or an authorized user. Empty means the application
	// default credentials: GOOGLE_APPLICATION_CREDENTIALS, gcloud's file,
	// then the metadata server (GKE workload identity, the node's account).
	CredentialsFile string `yaml:"credentials_file,omitempty"`
	// Scopes are the scopes asked; empty means GoogleMonitoringReadScope.
	Scopes []string `yaml:"scopes,omitempty"`
}

// googleFileTypes are the credentials file types accepted.
var googleFileTypes = []google.CredentialsType{
	google.ServiceAccount, google.ExternalAccount, google.ImpersonatedServiceAccount,
	google.AuthorizedUser, google.ExternalAccountAuthorizedUser,
}

// Validate checks the credentials file, when set, names a known type.
func (c *GoogleConfig) Validate() error {
	if c.CredentialsFile == "" {
		return nil
	}
	_, _, err := c.readFile()
	return err
}

func (c *GoogleConfig) readFile() ([]byte, google.CredentialsType, error) {
	data, err := os.ReadFile(c.CredentialsFile)
	if err != nil {
		return nil, "", fmt.Errorf("credentials_file: %w", err)
	}
	var f struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, "", fmt.Errorf("credentials_file %s: not a credentials JSON file: %w", c.CredentialsFile, err)
	}
	for _, t := range googleFileTypes {
		if google.CredentialsType(f.Type) == t {
			return data, t, nil
		}
	}
	return nil, "", fmt.Errorf("credentials_file %s: type %q is not one of %v", c.CredentialsFile, f.Type, googleFileTypes)
}

func (c *GoogleConfig) scopes() []string {
	if len(c.Scopes) > 0 {
		return c.Scopes
	}
	return []string{GoogleMonitoringReadScope}
}

// roundTripper sets a Google OAuth2 bearer token on each request; the token
// source caches it and asks a new one before it expires.
func (c *GoogleConfig) roundTripper(next http.RoundTripper) (http.RoundTripper, error) {
	// The token source keeps this context for every token request it
	// makes: it must not end.
	ctx := context.Background()
	var creds *google.Credentials
	var err error
	if c.CredentialsFile != "" {
		data, typ, rerr := c.readFile()
		if rerr != nil {
			return nil, fmt.Errorf("google: %w", rerr)
		}
		creds, err = google.CredentialsFromJSONWithType(ctx, data, typ, c.scopes()...)
	} else {
		creds, err = google.FindDefaultCredentials(ctx, c.scopes()...)
	}
	if err != nil {
		return nil, fmt.Errorf("google: %w", err)
	}
	if creds.TokenSource == nil {
		return nil, errors.New("google: the credentials have no token source")
	}
	return &oauth2.Transport{Source: oauth2.ReuseTokenSource(nil, creds.TokenSource), Base: next}, nil
}
