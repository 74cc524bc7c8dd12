package promclient

import (
	"fmt"

	"github.com/prometheus/sigv4"
	"github.com/spf13/pflag"
)

// Values of --prometheus-auth-azure.
const (
	AzureAuthManagedIdentity  = "managed-identity"
	AzureAuthWorkloadIdentity = "workload-identity"
	AzureAuthClientSecret     = "client-secret"
	AzureAuthSDK              = "sdk"
)

// CloudFlags are the default backend's cloud authentication flags: a
// CloudAuth in flags (the backends file's entries set theirs with the
// sigv4, azuread and google keys).
type CloudFlags struct {
	SigV4           bool
	SigV4Region     string
	SigV4RoleARN    string
	SigV4Service    string
	Azure           string
	AzureClientID   string
	AzureTenantID   string
	AzureSecretFile string
	AzureCloud      string
	AzureScope      string
	Google          bool
	GoogleCredsFile string
}

func (c *CloudFlags) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&c.SigV4, "prometheus-auth-sigv4", c.SigV4, "Sign requests to Prometheus with AWS SigV4 (Amazon Managed Service for Prometheus), with credentials from the AWS default chain (environment, IRSA, EKS Pod Identity, instance role), refreshed before they expire.")
	fs.StringVar(&c.SigV4Region, "prometheus-sigv4-region", c.SigV4Region, "AWS region of the SigV4 signature; empty takes the AWS chain's (AWS_REGION).")
	fs.StringVar(&c.SigV4RoleARN, "prometheus-sigv4-role-arn", c.SigV4RoleARN, "AWS role assumed through STS to sign with SigV4; empty signs with the chain's own credentials.")
	fs.StringVar(&c.SigV4Service, "prometheus-sigv4-service", c.SigV4Service, `Service name of the SigV4 signature; empty means "aps" (Amazon Managed Service for Prometheus).`)
	fs.StringVar(&c.Azure, "prometheus-auth-azure", c.Azure, `Authenticate to Prometheus (Azure Monitor managed service for Prometheus) with Entra ID tokens, refreshed before they expire: "managed-identity", "workload-identity", "client-secret" or "sdk" (azidentity's default chain).`)
	fs.StringVar(&c.AzureClientID, "prometheus-azure-client-id", c.AzureClientID, "Client ID of the Entra application or user-assigned managed identity (--prometheus-auth-azure).")
	fs.StringVar(&c.AzureTenantID, "prometheus-azure-tenant-id", c.AzureTenantID, "Entra tenant ID (--prometheus-auth-azure workload-identity, client-secret or sdk).")
	fs.StringVar(&c.AzureSecretFile, "prometheus-azure-client-secret-file", c.AzureSecretFile, "File holding the Entra application's client secret (--prometheus-auth-azure client-secret).")
	fs.StringVar(&c.AzureCloud, "prometheus-azure-cloud", c.AzureCloud, "Azure cloud: AzurePublic (default), AzureChina or AzureGovernment.")
	fs.StringVar(&c.AzureScope, "prometheus-azure-scope", c.AzureScope, "OAuth2 scope of the Entra tokens; empty means the cloud's Azure Monitor workspace query scope.")
	fs.BoolVar(&c.Google, "prometheus-auth-google", c.Google, "Authenticate to Prometheus (Google Cloud Managed Service for Prometheus) with Google OAuth2 tokens, refreshed before they expire: application default credentials (GKE workload identity) unless --prometheus-google-credentials-file.")
	fs.StringVar(&c.GoogleCredsFile, "prometheus-google-credentials-file", c.GoogleCredsFile, "Google credentials JSON file (service account key, external account); empty uses the application default credentials.")
}

// auth is the CloudAuth the flags set.
func (c *CloudFlags) auth() CloudAuth {
	var a CloudAuth
	if c.SigV4 {
		a.SigV4 = &sigv4.SigV4Config{Region: c.SigV4Region, RoleARN: c.SigV4RoleARN, ServiceName: c.SigV4Service}
	}
	switch c.Azure {
	case AzureAuthManagedIdentity:
		a.AzureAD = &AzureADConfig{ManagedIdentity: &AzureManagedIdentity{ClientID: c.AzureClientID}}
	case AzureAuthWorkloadIdentity:
		a.AzureAD = &AzureADConfig{WorkloadIdentity: &AzureWorkloadIdentity{ClientID: c.AzureClientID, TenantID: c.AzureTenantID}}
	case AzureAuthClientSecret:
		a.AzureAD = &AzureADConfig{OAuth: &AzureOAuth{ClientID: c.AzureClientID, TenantID: c.AzureTenantID, ClientSecretFile: c.AzureSecretFile}}
	case AzureAuthSDK:
		a.AzureAD = &AzureADConfig{SDK: &AzureSDK{TenantID: c.AzureTenantID}}
	}
	if a.AzureAD != nil {
		a.AzureAD.Cloud, a.AzureAD.Scope = c.AzureCloud, c.AzureScope
	}
	if c.Google {
		a.Google = &GoogleConfig{CredentialsFile: c.GoogleCredsFile}
	}
	return a
}

// validate reports the cloud flags' problems, each naming its flag.
func (c *CloudFlags) validate(o *Options) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch c.Azure {
	case "", AzureAuthManagedIdentity, AzureAuthWorkloadIdentity, AzureAuthClientSecret, AzureAuthSDK:
	default:
		add("--prometheus-auth-azure %q: must be %s, %s, %s or %s", c.Azure, AzureAuthManagedIdentity, AzureAuthWorkloadIdentity, AzureAuthClientSecret, AzureAuthSDK)
		return errs
	}
	if !c.SigV4 && (c.SigV4Region != "" || c.SigV4RoleARN != "" || c.SigV4Service != "") {
		add("--prometheus-sigv4-*: need --prometheus-auth-sigv4")
	}
	if c.Azure == "" && (c.AzureClientID != "" || c.AzureTenantID != "" || c.AzureSecretFile != "" || c.AzureCloud != "" || c.AzureScope != "") {
		add("--prometheus-azure-*: need --prometheus-auth-azure")
	}
	if c.Azure != AzureAuthClientSecret && c.AzureSecretFile != "" {
		add("--prometheus-azure-client-secret-file: only with --prometheus-auth-azure=%s", AzureAuthClientSecret)
	}
	if !c.Google && c.GoogleCredsFile != "" {
		add("--prometheus-google-credentials-file: needs --prometheus-auth-google")
	}
	a := c.auth()
	if a.IsZero() {
		return errs
	}
	if err := a.Validate(); err != nil {
		add("--prometheus-auth-%s: %v", flagOfAuth(a), err)
		return errs
	}
	b := Backend{Kubeconfig: o.AuthConfig, InCluster: o.AuthInCluster}
	if o.TokenFile != "" || o.BasicAuthPasswordFile != "" {
		add("--prometheus-auth-%s and --prometheus-token-file or --prometheus-basic-auth-*: choose one authorization", flagOfAuth(a))
	} else if err := a.conflictsWithHTTPAuth(b); err != nil {
		add("--prometheus-auth-%s: %v", flagOfAuth(a), err)
	}
	for _, h := range o.Headers {
		if k, _, err := parseHeader(h); err == nil && k == "Authorization" {
			add("--prometheus-auth-%s and an Authorization --prometheus-header: choose one authorization", flagOfAuth(a))
		}
	}
	return errs
}

// flagOfAuth names the --prometheus-auth-* flag of a's authentication
// (the first one when several are set).
func flagOfAuth(a CloudAuth) string {
	switch {
	case a.SigV4 != nil:
		return "sigv4"
	case a.AzureAD != nil:
		return "azure"
	}
	return "google"
}
