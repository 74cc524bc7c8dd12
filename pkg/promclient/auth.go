package promclient

import (
	"fmt"
	"net/http"

	"github.com/prometheus/sigv4"
)

// CloudAuth is how a backend authenticates to a managed Prometheus: at most
// one of its fields is set. Each is served by the library its cloud's
// ecosystem maintains, which also refreshes the credentials before they
// expire (no restart):
//
//   - SigV4 (Amazon Managed Service for Prometheus): the Prometheus
//     project's SigV4 round tripper (github.com/prometheus/sigv4), with its
//     configuration keys; credentials from the AWS default chain
//     (environment, shared files, IRSA's web identity, EKS Pod Identity,
//     ECS/EC2 roles) unless set, optionally through an assumed role.
//   - AzureAD (Azure Monitor managed service for Prometheus): Entra ID
//     tokens from Azure's identity library (azidentity): managed identity,
//     workload identity, client secret or the SDK's default chain, with
//     the keys of Prometheus' remote write azuread block.
//   - Google (Google Cloud Managed Service for Prometheus): OAuth2 tokens
//     from golang.org/x/oauth2/google: application default credentials
//     (GKE workload identity through the metadata server) or a
//     credentials file.
type CloudAuth struct {
	SigV4   *sigv4.SigV4Config `yaml:"sigv4,omitempty"`
	AzureAD *AzureADConfig     `yaml:"azuread,omitempty"`
	Google  *GoogleConfig      `yaml:"google,omitempty"`
}

// IsZero reports whether no cloud authentication is set.
func (a CloudAuth) IsZero() bool { return a.SigV4 == nil && a.AzureAD == nil && a.Google == nil }

// Validate checks the set authentication: at most one, each valid.
func (a CloudAuth) Validate() error {
	var set []string
	if a.SigV4 != nil {
		set = append(set, "sigv4")
		if err := a.SigV4.Validate(); err != nil {
			return fmt.Errorf("sigv4: %w", err)
		}
	}
	if a.AzureAD != nil {
		set = append(set, "azuread")
		if err := a.AzureAD.Validate(); err != nil {
			return fmt.Errorf("azuread: %w", err)
		}
	}
	if a.Google != nil {
		set = append(set, "google")
		if err := a.Google.Validate(); err != nil {
			return fmt.Errorf("google: %w", err)
		}
	}
	if len(set) > 1 {
		return fmt.Errorf("%s: choose one cloud authentication", joinKeys(set))
	}
	return nil
}

// name is the key of the set authentication, "" when none.
func (a CloudAuth) name() string {
	switch {
	case a.SigV4 != nil:
		return "sigv4"
	case a.AzureAD != nil:
		return "azuread"
	case a.Google != nil:
		return "google"
	}
	return ""
}

// conflictsWithHTTPAuth reports the HTTP client authorization a cloud
// authentication would fight with (both set Authorization).
func (a CloudAuth) conflictsWithHTTPAuth(b Backend) error {
	if a.IsZero() {
		return nil
	}
	h := b.HTTP
	if h.Authorization != nil || h.BasicAuth != nil || h.OAuth2 != nil || h.BearerToken != "" || h.BearerTokenFile != "" {
		return fmt.Errorf("%s and authorization, basic_auth, oauth2 or a bearer token: choose one authorization", a.name())
	}
	if b.Kubeconfig != "" || b.InCluster {
		return fmt.Errorf("%s and Kubernetes credentials (a kubeconfig or in-cluster): choose one authorization", a.name())
	}
	if b.Headers.Get("Authorization") != "" {
		return fmt.Errorf("%s and an Authorization header: choose one authorization", a.name())
	}
	return nil
}

// roundTripper wraps next with the set authentication; next unchanged when
// none is set. It must wrap the transport below the headers set on every
// request, so that SigV4 signs them.
func (a CloudAuth) roundTripper(next http.RoundTripper) (http.RoundTripper, error) {
	switch {
	case a.SigV4 != nil:
		return newSigV4RoundTripper(a.SigV4, next)
	case a.AzureAD != nil:
		return a.AzureAD.roundTripper(next)
	case a.Google != nil:
		return a.Google.roundTripper(next)
	}
	return next, nil
}

func joinKeys(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	out := keys[0]
	for _, k := range keys[1:] {
		out += " and " + k
	}
	return out
}
