package awsenv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// CredentialsError is a configuration with no usable AWS credentials. Its
// message is one line that says what to set; the provider chain's own error
// (which lists every provider it tried) stays reachable through Unwrap.
// It is the one error of the CLI and of leasehold's constructors for
// missing credentials.
type CredentialsError struct {
	// Profile is the shared config profile asked for, if one was.
	Profile string
	// Err is the credentials provider's error, nil when the configuration
	// has no provider at all.
	Err error
}

func (e *CredentialsError) Error() string {
	switch {
	case e.Profile != "":
		return fmt.Sprintf("no AWS credentials for profile %q: check ~/.aws/credentials, or run `aws sso login --profile %s`", e.Profile, e.Profile)
	case errors.Is(e.Err, ErrNoCredentials):
		// A Load configuration: its own line already says what to set.
		return ErrNoCredentials.Error()
	}
	return "no AWS credentials: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY " +
		"(for the local stack: eval \"$(scripts/stack.sh env)\")"
}

func (e *CredentialsError) Unwrap() error { return e.Err }

// CheckCredentials retrieves cfg's credentials once, within timeout, and
// returns a *CredentialsError naming profile (may be "") if there are none:
// without them every call would fail with the SDK's whole provider chain in
// its message.
func CheckCredentials(ctx context.Context, cfg aws.Config, profile string, timeout time.Duration) error {
	if cfg.Credentials == nil {
		return &CredentialsError{Profile: profile}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return &CredentialsError{Profile: profile, Err: err}
	}
	return nil
}
