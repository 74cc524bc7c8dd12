package promclient

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/sigv4"
)

// credentialsLoadTimeout bounds the loading of cloud credentials when a
// backend is built (the AWS chain's instance metadata, an STS call).
const credentialsLoadTimeout = 30 * time.Second

// newSigV4RoundTripper signs each request with AWS Signature Version 4 (the
// service name "aps" unless cfg names another), on the Prometheus project's
// round tripper: credentials from cfg's keys, else the AWS default chain
// (AWS_* environment variables, shared files and profile, IRSA's
// AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, EKS Pod Identity's
// AWS_CONTAINER_CREDENTIALS_FULL_URI, the EC2 instance role), then role_arn
// assumed through STS when set. They are cached and refreshed before they
// expire. The first ones are fetched now, so that a backend without
// credentials fails when it is built, not on every query.
func newSigV4RoundTripper(cfg *sigv4.SigV4Config, next http.RoundTripper) (http.RoundTripper, error) {
	ctx, cancel := context.WithTimeout(context.Background(), credentialsLoadTimeout)
	defer cancel()
	rt, err := sigv4.NewSigV4RoundTripper(cfg, next, sigv4.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("sigv4: %w", err)
	}
	return rt, nil
}
