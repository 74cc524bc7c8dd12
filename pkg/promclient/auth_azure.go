package promclient

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/prometheus/common/config"
)

// Azure clouds (AzureADConfig.Cloud), as in Prometheus' remote write
// azuread block.
const (
	AzurePublic     = "AzurePublic"
	AzureChina      = "AzureChina"
	AzureGovernment = "AzureGovernment"
)

// azureQueryScopes are the OAuth2 scopes of the query API of an Azure
// Monitor workspace, per cloud (Prometheus' azuread defaults are the
// ingestion ones, monitor.azure.*, which queries are refused with).
var azureQueryScopes = map[string]string{
	AzurePublic:     "https://prometheus.monitor.azure.com/.default",
	AzureChina:      "https://prometheus.monitor.azure.cn/.default",
	AzureGovernment: "https://prometheus.monitor.azure.us/.default",
}

// AzureADConfig authenticates to Azure Monitor managed service for
// Prometheus with Entra ID tokens from azidentity. Exactly one of
// ManagedIdentity, WorkloadIdentity, OAuth and SDK is set. The keys are
// those of Prometheus' remote write azuread block, plus client_secret_file.
type AzureADConfig struct {
	// ManagedIdentity: the pod's or node's managed identity (IMDS, or the
	// environment's IDENTITY_ENDPOINT); ClientID picks a user-assigned one.
	ManagedIdentity *AzureManagedIdentity `yaml:"managed_identity,omitempty"`
	// WorkloadIdentity: AKS workload identity, the service account token
	// file exchanged for an Entra token; empty fields are read from the
	// webhook's AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE.
	WorkloadIdentity *AzureWorkloadIdentity `yaml:"workload_identity,omitempty"`
	// OAuth: an application's client secret.
	OAuth *AzureOAuth `yaml:"oauth,omitempty"`
	// SDK: azidentity's default chain (environment, workload identity,
	// managed identity, the Azure CLI).
	SDK *AzureSDK `yaml:"sdk,omitempty"`
	// Cloud is AzurePublic (default), AzureChina or AzureGovernment.
	Cloud string `yaml:"cloud,omitempty"`
	// Scope is the scope asked; empty means the cloud's Azure Monitor
	// workspace query scope.
	Scope string `yaml:"scope,omitempty"`

	// clientOptions replaces the cloud's options and noInstanceDiscovery
	// skips Entra's instance discovery (tests: a fake authority).
	clientOptions       *azcore.ClientOptions
	noInstanceDiscovery bool
}

// AzureManagedIdentity is AzureADConfig.ManagedIdentity.
type AzureManagedIdentity struct {
	ClientID string `yaml:"client_id,omitempty"`
}

// AzureWorkloadIdentity is AzureADConfig.WorkloadIdentity.
type AzureWorkloadIdentity struct {
	ClientID      string `yaml:"client_id,omitempty"`
	TenantID      string `yaml:"tenant_id,omitempty"`
	TokenFilePath string `yaml:"token_file_path,omitempty"`
}

// AzureOAuth is AzureADConfig.OAuth: ClientSecret or ClientSecretFile (read
// when the backend is built: at start and when the backends file changes).
type AzureOAuth struct {
	ClientID         string        `yaml:"client_id"`
	ClientSecret     config.Secret `yaml:"client_secret,omitempty"`
	ClientSecretFile string        `yaml:"client_secret_file,omitempty"`
	TenantID         string        `yaml:"tenant_id"`
}

// AzureSDK is AzureADConfig.SDK.
type AzureSDK struct {
	TenantID string `yaml:"tenant_id,omitempty"`
}

// Validate checks that one way to authenticate is set, with what it needs.
func (c *AzureADConfig) Validate() error {
	n := 0
	for _, set := range []bool{c.ManagedIdentity != nil, c.WorkloadIdentity != nil, c.OAuth != nil, c.SDK != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return errors.New("set exactly one of managed_identity, workload_identity, oauth and sdk")
	}
	if _, err := c.cloud(); err != nil {
		return err
	}
	if o := c.OAuth; o != nil {
		switch {
		case o.ClientID == "" || o.TenantID == "":
			return errors.New("oauth needs client_id and tenant_id")
		case (o.ClientSecret == "") == (o.ClientSecretFile == ""):
			return errors.New("oauth needs one of client_secret and client_secret_file")
		}
	}
	return nil
}

func (c *AzureADConfig) cloud() (cloud.Configuration, error) {
	switch strings.ToLower(c.Cloud) {
	case "", strings.ToLower(AzurePublic):
		return cloud.AzurePublic, nil
	case strings.ToLower(AzureChina):
		return cloud.AzureChina, nil
	case strings.ToLower(AzureGovernment):
		return cloud.AzureGovernment, nil
	}
	return cloud.Configuration{}, fmt.Errorf("cloud %q: must be %s, %s or %s", c.Cloud, AzurePublic, AzureChina, AzureGovernment)
}

func (c *AzureADConfig) scope() string {
	if c.Scope != "" {
		return c.Scope
	}
	for name, s := range azureQueryScopes {
		if strings.EqualFold(name, c.Cloud) {
			return s
		}
	}
	return azureQueryScopes[AzurePublic]
}

// credential builds the azidentity credential the config names.
func (c *AzureADConfig) credential() (azcore.TokenCredential, error) {
	cc, err := c.cloud()
	if err != nil {
		return nil, err
	}
	opts := azcore.ClientOptions{Cloud: cc}
	if c.clientOptions != nil {
		opts = *c.clientOptions
	}
	switch {
	case c.ManagedIdentity != nil:
		o := &azidentity.ManagedIdentityCredentialOptions{ClientOptions: opts}
		if c.ManagedIdentity.ClientID != "" {
			o.ID = azidentity.ClientID(c.ManagedIdentity.ClientID)
		}
		return azidentity.NewManagedIdentityCredential(o)
	case c.WorkloadIdentity != nil:
		w := c.WorkloadIdentity
		return azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{
			ClientOptions: opts, ClientID: w.ClientID, TenantID: w.TenantID, TokenFilePath: w.TokenFilePath,
			DisableInstanceDiscovery: c.noInstanceDiscovery,
		})
	case c.OAuth != nil:
		secret := string(c.OAuth.ClientSecret)
		if c.OAuth.ClientSecretFile != "" {
			data, err := os.ReadFile(c.OAuth.ClientSecretFile)
			if err != nil {
				return nil, fmt.Errorf("oauth: reading client_secret_file: %w", err)
			}
			secret = strings.TrimSpace(string(data))
		}
		return azidentity.NewClientSecretCredential(c.OAuth.TenantID, c.OAuth.ClientID, secret,
			&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: c.noInstanceDiscovery})
	default:
		return azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{ClientOptions: opts, TenantID: c.SDK.TenantID})
	}
}

// roundTripper sets an Entra ID bearer token on each request. azidentity
// caches the token and asks a new one before it expires.
func (c *AzureADConfig) roundTripper(next http.RoundTripper) (http.RoundTripper, error) {
	cred, err := c.credential()
	if err != nil {
		return nil, fmt.Errorf("azuread: %w", err)
	}
	return &azureRoundTripper{cred: cred, scopes: []string{c.scope()}, next: next}, nil
}

type azureRoundTripper struct {
	cred   azcore.TokenCredential
	scopes []string
	next   http.RoundTripper
}

func (rt *azureRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := rt.cred.GetToken(req.Context(), policy.TokenRequestOptions{Scopes: rt.scopes})
	if err != nil {
		closeBody(req)
		return nil, fmt.Errorf("azuread: getting a token: %w", err)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	return rt.next.RoundTrip(req)
}

// closeBody closes a request's body, as a RoundTripper must even when it
// fails.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
