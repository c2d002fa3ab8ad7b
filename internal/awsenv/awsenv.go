// Package awsenv builds the AWS SDK configuration of leasehold's Lambda
// functions (functions/worker, functions/dispatch) from their environment
// alone.
//
// config.LoadDefaultConfig would also do that, but it links the SDK's whole
// credential chain (shared config and credentials files, SSO, STS web
// identity and assume-role, process credentials, the container and EC2
// instance metadata endpoints) into the binary, about 1.5 MB of a Lambda
// bootstrap that needs none of it, and its STS, SSO, SSO OIDC and sign-in
// clients cost each cold start their package initialisation: Lambda hands a
// function its role's credentials and its region in environment variables.
// So the package does not import the SDK's config package at all. Load
// parses the variables below itself and gives the configuration what
// LoadDefaultConfig gives it from the same environment (awsenv_test checks
// that, variable by variable):
//
//   - credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or their
//     old spellings AWS_ACCESS_KEY and AWS_SECRET_KEY), with
//     AWS_SESSION_TOKEN and AWS_ACCOUNT_ID;
//   - the region from AWS_REGION, else AWS_DEFAULT_REGION;
//   - AWS_MAX_ATTEMPTS, AWS_RETRY_MODE, AWS_SDK_UA_APP_ID, AWS_DEFAULTS_MODE,
//     AWS_ACCOUNT_ID_ENDPOINT_MODE, AWS_REQUEST_CHECKSUM_CALCULATION,
//     AWS_RESPONSE_CHECKSUM_VALIDATION, AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES,
//     AWS_DISABLE_REQUEST_COMPRESSION, AWS_DISABLE_CLOCK_SKEW_CORRECTION and
//     AWS_AUTH_SCHEME_PREFERENCE;
//   - AWS_ENDPOINT_URL as the base endpoint, unless
//     AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true.
//
// The service clients read the rest from the configuration's
// ConfigSources, through interfaces internal to the SDK; Load puts there a
// source of its own with the methods the DynamoDB and SQS clients call:
// AWS_ENDPOINT_URL_<service> (the service's SDK ID in upper case, spaces
// as underscores: AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS),
// AWS_IGNORE_CONFIGURED_ENDPOINT_URLS, AWS_USE_FIPS_ENDPOINT,
// AWS_USE_DUALSTACK_ENDPOINT and AWS_ENABLE_ENDPOINT_DISCOVERY. A
// malformed value of any of these variables fails Load, as it fails
// LoadDefaultConfig. The HTTP client is the SDK's default behind GuardHTTP
// (HTTPClient), one for every service client of the configuration.
//
// What a function does not get: credentials from anywhere else, so none
// from AWS_CONTAINER_CREDENTIALS_*, AWS_WEB_IDENTITY_TOKEN_FILE, a profile
// or the instance metadata service; no setting from shared config files or
// AWS_PROFILE; no region from the instance metadata service; no
// AWS_CA_BUNDLE; no check of the variables that only those, or other
// services' clients (S3's, the metadata client's), read. template.yaml sets
// none of these on the functions, and Lambda sets only the credentials and
// region variables. The CLI, `leasehold run` and the tests keep
// LoadDefaultConfig.
package awsenv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/logging"
)

// ErrNoCredentials is what every AWS call fails with when the environment
// holds no access key.
var ErrNoCredentials = errors.New("no AWS credentials in the environment: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must both be set (Lambda sets them from the function's role)")

const (
	// defaultMinCompressSize is LoadDefaultConfig's
	// RequestMinCompressSizeBytes when
	// AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES is not set, and
	// maxMinCompressSize the largest value it accepts.
	defaultMinCompressSize = 10240
	maxMinCompressSize     = 10 << 20

	// credentialsSource is the Source of the credentials that
	// LoadDefaultConfig reads from the environment.
	credentialsSource = "EnvConfigCredentials"
)

// Load returns the SDK configuration that the process environment
// describes. It fails only on a malformed value (AWS_MAX_ATTEMPTS=x, an
// unknown AWS_RETRY_MODE...), as LoadDefaultConfig does; without
// credentials it succeeds and every call fails with ErrNoCredentials.
func Load() (aws.Config, error) {
	var p parser
	bools := map[string]bool{"true": true, "false": false}
	src := source{
		ignoreEndpoints: pick(&p, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", bools),
		fips: pick(&p, "AWS_USE_FIPS_ENDPOINT", map[string]aws.FIPSEndpointState{
			"true": aws.FIPSEndpointStateEnabled, "false": aws.FIPSEndpointStateDisabled,
		}),
		dualStack: pick(&p, "AWS_USE_DUALSTACK_ENDPOINT", map[string]aws.DualStackEndpointState{
			"true": aws.DualStackEndpointStateEnabled, "false": aws.DualStackEndpointStateDisabled,
		}),
		discovery: pick(&p, "AWS_ENABLE_ENDPOINT_DISCOVERY", map[string]aws.EndpointDiscoveryEnableState{
			"true": aws.EndpointDiscoveryEnabled, "false": aws.EndpointDiscoveryDisabled, "auto": aws.EndpointDiscoveryAuto,
		}),
	}
	region := first("AWS_REGION", "AWS_DEFAULT_REGION")
	cfg := aws.Config{
		Region:                region,
		Logger:                logging.NewStandardLogger(os.Stderr),
		ConfigSources:         []any{src},
		RetryMaxAttempts:      p.int("AWS_MAX_ATTEMPTS", 0),
		AppID:                 os.Getenv("AWS_SDK_UA_APP_ID"),
		DefaultsMode:          aws.DefaultsModeLegacy,
		AccountIDEndpointMode: aws.AccountIDEndpointMode(os.Getenv("AWS_ACCOUNT_ID_ENDPOINT_MODE")),
		RequestChecksumCalculation: pick(&p, "AWS_REQUEST_CHECKSUM_CALCULATION", map[string]aws.RequestChecksumCalculation{
			"when_supported": aws.RequestChecksumCalculationWhenSupported,
			"when_required":  aws.RequestChecksumCalculationWhenRequired,
		}),
		ResponseChecksumValidation: pick(&p, "AWS_RESPONSE_CHECKSUM_VALIDATION", map[string]aws.ResponseChecksumValidation{
			"when_supported": aws.ResponseChecksumValidationWhenSupported,
			"when_required":  aws.ResponseChecksumValidationWhenRequired,
		}),
		RequestMinCompressSizeBytes: int64(p.int("AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES", defaultMinCompressSize)),
		DisableRequestCompression:   pick(&p, "AWS_DISABLE_REQUEST_COMPRESSION", bools),
		DisableClockSkewCorrection:  pick(&p, "AWS_DISABLE_CLOCK_SKEW_CORRECTION", bools),
		AuthSchemePreference:        list(os.Getenv("AWS_AUTH_SCHEME_PREFERENCE")),
		HTTPClient:                  HTTPClient(0),
	}
	if v := os.Getenv("AWS_RETRY_MODE"); v != "" {
		mode, err := aws.ParseRetryMode(v)
		if err != nil {
			p.fail("AWS_RETRY_MODE", v, err.Error())
		}
		cfg.RetryMode = mode
	}
	if v := os.Getenv("AWS_DEFAULTS_MODE"); v != "" && !cfg.DefaultsMode.SetFromString(v) {
		p.fail("AWS_DEFAULTS_MODE", v, "unknown defaults mode")
	}
	switch cfg.AccountIDEndpointMode { // compared exactly, as the SDK does
	case "":
		cfg.AccountIDEndpointMode = aws.AccountIDEndpointModePreferred
	case aws.AccountIDEndpointModePreferred, aws.AccountIDEndpointModeRequired, aws.AccountIDEndpointModeDisabled:
	default:
		p.fail("AWS_ACCOUNT_ID_ENDPOINT_MODE", string(cfg.AccountIDEndpointMode), "want preferred, required or disabled")
	}
	if n := cfg.RequestMinCompressSizeBytes; n < 0 || n > maxMinCompressSize {
		p.fail("AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES", strconv.FormatInt(n, 10), fmt.Sprintf("want 0 to %d", maxMinCompressSize))
	}
	if p.err != nil {
		return aws.Config{}, p.err
	}

	if cfg.DefaultsMode == aws.DefaultsModeAuto {
		// LoadDefaultConfig also asks the instance metadata service for
		// its region; a Lambda function has no such service.
		cfg.RuntimeEnvironment = aws.RuntimeEnvironment{
			EnvironmentIdentifier: aws.ExecutionEnvironmentID(os.Getenv("AWS_EXECUTION_ENV")),
			Region:                region,
		}
	}
	if cfg.RequestChecksumCalculation == 0 {
		cfg.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenSupported
	}
	if cfg.ResponseChecksumValidation == 0 {
		cfg.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenSupported
	}
	if v := os.Getenv("AWS_ENDPOINT_URL"); v != "" && !src.ignoreEndpoints {
		cfg.BaseEndpoint = aws.String(v)
	}

	creds := aws.Credentials{
		AccessKeyID:     first("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY"),
		SecretAccessKey: first("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY"),
		SessionToken:    os.Getenv("AWS_SESSION_TOKEN"),
		AccountID:       os.Getenv("AWS_ACCOUNT_ID"),
		Source:          credentialsSource,
	}
	if creds.HasKeys() {
		cfg.Credentials = aws.NewCredentialsCache(credentials.StaticCredentialsProvider{
			Value:  creds,
			Source: []aws.CredentialSource{aws.CredentialSourceEnvVars},
		})
	} else {
		cfg.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, ErrNoCredentials
		})
	}
	return cfg, nil
}

// source is the configuration's ConfigSources entry. The service clients
// find its methods through the SDK's internal/configsources interfaces
// (ResolveServiceBaseEndpoint, GetIgnoreConfiguredEndpoints,
// ResolveUseFIPSEndpoint, ResolveUseDualStackEndpoint,
// ResolveEnableEndpointDiscovery); each reports found only for a variable
// that is set, as the SDK's own environment source does.
type source struct {
	ignoreEndpoints bool
	fips            aws.FIPSEndpointState
	dualStack       aws.DualStackEndpointState
	discovery       aws.EndpointDiscoveryEnableState
}

// GetServiceBaseEndpoint returns AWS_ENDPOINT_URL_<sdkID>, sdkID in upper
// case with its spaces as underscores. Like the SDK, it reads the variable
// when a client is made.
func (source) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	v := os.Getenv("AWS_ENDPOINT_URL_" + strings.ReplaceAll(strings.ToUpper(sdkID), " ", "_"))
	return v, v != "", nil
}

func (s source) GetIgnoreConfiguredEndpoints(context.Context) (bool, bool, error) {
	return s.ignoreEndpoints, s.ignoreEndpoints, nil // false and unset mean the same
}

func (s source) GetUseFIPSEndpoint(context.Context) (aws.FIPSEndpointState, bool, error) {
	return s.fips, s.fips != aws.FIPSEndpointStateUnset, nil
}

func (s source) GetUseDualStackEndpoint(context.Context) (aws.DualStackEndpointState, bool, error) {
	return s.dualStack, s.dualStack != aws.DualStackEndpointStateUnset, nil
}

func (s source) GetEnableEndpointDiscovery(context.Context) (aws.EndpointDiscoveryEnableState, bool, error) {
	return s.discovery, s.discovery != aws.EndpointDiscoveryUnset, nil
}

// first returns the value of the first of the variables that is set. As
// for the SDK, a variable set to "" is not set.
func first(names ...string) string {
	for _, name := range names {
		if v := os.Getenv(name); v != "" {
			return v
		}
	}
	return ""
}

// parser keeps the first malformed value it meets.
type parser struct{ err error }

func (p *parser) fail(name, value, why string) {
	if p.err == nil {
		p.err = fmt.Errorf("invalid environment variable %s=%q: %s", name, value, why)
	}
}

// pick returns the choice that the variable's value names, in any case,
// and T's zero value if the variable is not set.
func pick[T any](p *parser, name string, choices map[string]T) T {
	v := os.Getenv(name)
	if v == "" {
		var unset T
		return unset
	}
	c, ok := choices[strings.ToLower(v)]
	if !ok {
		p.fail(name, v, "want "+strings.Join(slices.Sorted(maps.Keys(choices)), ", "))
	}
	return c
}

// int returns the variable's value, def if it is not set.
func (p *parser) int(name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		p.fail(name, v, "not an integer")
	}
	return n
}

// list splits a comma-separated list, dropping blank items.
func list(v string) []string {
	var items []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}
