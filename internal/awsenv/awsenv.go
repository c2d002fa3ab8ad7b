// Package awsenv builds the AWS SDK configuration of leasehold's Lambda
// functions (functions/worker, functions/dispatch) from their environment
// alone.
//
// config.LoadDefaultConfig would also do that, but it links the SDK's whole
// credential chain (shared config and credentials files, SSO, STS web
// identity and assume-role, process credentials, the container and EC2
// instance metadata endpoints) into the binary, about 1.5 MB of a Lambda
// bootstrap that needs none of it: Lambda hands a function its role's
// credentials and its region in environment variables. Load reads the
// environment with the SDK's own parser (config.NewEnvConfig) and puts that
// parser's result in the configuration's ConfigSources, so that the service
// clients resolve AWS_ENDPOINT_URL_<SERVICE>, AWS_IGNORE_CONFIGURED_ENDPOINT_URLS,
// AWS_USE_FIPS_ENDPOINT, AWS_USE_DUALSTACK_ENDPOINT and
// AWS_ENABLE_ENDPOINT_DISCOVERY with the SDK's code, as they do from a
// LoadDefaultConfig configuration. The HTTP client is the SDK's default
// behind GuardHTTP (HTTPClient), one for every service client of the
// configuration.
//
// What a function does not get: credentials from anywhere but
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN and
// AWS_ACCOUNT_ID), so none from AWS_CONTAINER_CREDENTIALS_*,
// AWS_WEB_IDENTITY_TOKEN_FILE, a profile or the instance metadata service;
// no setting from shared config files or AWS_PROFILE; no region from the
// instance metadata service; no AWS_CA_BUNDLE. template.yaml sets none of
// these on the functions, and Lambda sets only the credentials and region
// variables. The CLI, `leasehold run` and the tests keep LoadDefaultConfig.
package awsenv

import (
	"context"
	"errors"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/logging"
)

// ErrNoCredentials is what every AWS call fails with when the environment
// holds no access key.
var ErrNoCredentials = errors.New("no AWS credentials in the environment: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must both be set (Lambda sets them from the function's role)")

// defaultMinCompressSize is LoadDefaultConfig's RequestMinCompressSizeBytes
// when AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES is not set.
const defaultMinCompressSize = 10240

// Load returns the SDK configuration that the process environment
// describes. It fails only on a malformed value (AWS_MAX_ATTEMPTS=x, an
// unknown AWS_RETRY_MODE...), as LoadDefaultConfig does; without
// credentials it succeeds and every call fails with ErrNoCredentials.
func Load() (aws.Config, error) {
	env, err := config.NewEnvConfig()
	if err != nil {
		return aws.Config{}, err
	}
	return fromEnv(env), nil
}

// fromEnv sets what LoadDefaultConfig's resolvers set from an EnvConfig,
// with LoadDefaultConfig's defaults for what env leaves unset.
func fromEnv(env config.EnvConfig) aws.Config {
	cfg := aws.Config{
		Region:                      env.Region,
		Logger:                      logging.NewStandardLogger(os.Stderr),
		ConfigSources:               []any{env},
		RetryMode:                   env.RetryMode,
		RetryMaxAttempts:            env.RetryMaxAttempts,
		AppID:                       env.AppID,
		DefaultsMode:                env.DefaultsMode,
		AccountIDEndpointMode:       env.AccountIDEndpointMode,
		RequestChecksumCalculation:  env.RequestChecksumCalculation,
		ResponseChecksumValidation:  env.ResponseChecksumValidation,
		RequestMinCompressSizeBytes: defaultMinCompressSize,
		AuthSchemePreference:        env.AuthSchemePreference,
		HTTPClient:                  HTTPClient(0),
	}
	if env.Credentials.HasKeys() {
		cfg.Credentials = aws.NewCredentialsCache(credentials.StaticCredentialsProvider{
			Value:  env.Credentials,
			Source: []aws.CredentialSource{aws.CredentialSourceEnvVars},
		})
	} else {
		cfg.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, ErrNoCredentials
		})
	}
	if env.IgnoreConfiguredEndpoints == nil || !*env.IgnoreConfiguredEndpoints {
		if env.BaseEndpoint != "" {
			cfg.BaseEndpoint = aws.String(env.BaseEndpoint)
		}
	}
	if cfg.DefaultsMode == "" {
		cfg.DefaultsMode = aws.DefaultsModeLegacy
	}
	if cfg.DefaultsMode == aws.DefaultsModeAuto {
		// LoadDefaultConfig also asks the instance metadata service for
		// its region; a Lambda function has no such service.
		cfg.RuntimeEnvironment = aws.RuntimeEnvironment{
			EnvironmentIdentifier: aws.ExecutionEnvironmentID(os.Getenv("AWS_EXECUTION_ENV")),
			Region:                env.Region,
		}
	}
	if cfg.AccountIDEndpointMode == "" {
		cfg.AccountIDEndpointMode = aws.AccountIDEndpointModePreferred
	}
	if cfg.RequestChecksumCalculation == 0 {
		cfg.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenSupported
	}
	if cfg.ResponseChecksumValidation == 0 {
		cfg.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenSupported
	}
	if env.RequestMinCompressSizeBytes != nil {
		cfg.RequestMinCompressSizeBytes = *env.RequestMinCompressSizeBytes
	}
	if env.DisableRequestCompression != nil {
		cfg.DisableRequestCompression = *env.DisableRequestCompression
	}
	if env.DisableClockSkewCorrection != nil {
		cfg.DisableClockSkewCorrection = *env.DisableClockSkewCorrection
	}
	return cfg
}
