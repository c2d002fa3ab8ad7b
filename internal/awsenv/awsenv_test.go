package awsenv_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/awsenv"
)

// setEnv replaces every AWS_* variable of the process with vars, for the
// test's duration. Unset, not empty: the service clients look some of them
// up (os.LookupEnv) and treat an empty one as set.
func setEnv(t *testing.T, vars map[string]string) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "AWS_") {
			t.Setenv(name, "") // restored after the test
			os.Unsetenv(name)
		}
	}
	for name, v := range vars {
		t.Setenv(name, v)
	}
}

const (
	akid   = "AKIDAWSENVTEST"
	secret = "awsenv-secret"
)

// lambdaEnv is what Lambda sets, plus the local stack's endpoints.
func lambdaEnv(more ...string) map[string]string {
	env := map[string]string{
		"AWS_REGION":            "eu-west-3",
		"AWS_DEFAULT_REGION":    "eu-west-3",
		"AWS_ACCESS_KEY_ID":     akid,
		"AWS_SECRET_ACCESS_KEY": secret,
		"AWS_SESSION_TOKEN":     "awsenv-token",
		"AWS_EXECUTION_ENV":     "AWS_Lambda_provided.al2023",
	}
	for i := 0; i+1 < len(more); i += 2 {
		env[more[i]] = more[i+1]
	}
	return env
}

// TestMatchesLoadDefaultConfig loads the same environments with Load and
// with config.LoadDefaultConfig (shared files and the instance metadata
// service out of the way) and compares what the two give the worker's and
// the dispatcher's clients.
func TestMatchesLoadDefaultConfig(t *testing.T) {
	cases := map[string]map[string]string{
		"lambda": lambdaEnv(),
		"local stack endpoints": lambdaEnv(
			"AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:4720",
			"AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:4721"),
		"global and one service endpoint": lambdaEnv(
			"AWS_ENDPOINT_URL", "http://127.0.0.1:4722",
			"AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:4720"),
		"configured endpoints ignored": lambdaEnv(
			"AWS_ENDPOINT_URL", "http://127.0.0.1:4722",
			"AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:4720",
			"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true"),
		"configured endpoints ignored, upper case": lambdaEnv(
			"AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:4721",
			"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "TRUE"),
		"configured endpoints not ignored": lambdaEnv(
			"AWS_ENDPOINT_URL", "http://127.0.0.1:4722",
			"AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:4721",
			"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "false"),
		"SQS endpoint only":      lambdaEnv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:4720"),
		"DynamoDB endpoint only": lambdaEnv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:4721"),
		"global endpoint only":   lambdaEnv("AWS_ENDPOINT_URL", "http://127.0.0.1:4722"),
		"empty endpoints": lambdaEnv(
			"AWS_ENDPOINT_URL", "",
			"AWS_ENDPOINT_URL_SQS", "",
			"AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:4721"),
		"FIPS":                    lambdaEnv("AWS_USE_FIPS_ENDPOINT", "True"),
		"no FIPS":                 lambdaEnv("AWS_USE_FIPS_ENDPOINT", "false"),
		"dual-stack":              lambdaEnv("AWS_USE_DUALSTACK_ENDPOINT", "true"),
		"no dual-stack":           lambdaEnv("AWS_USE_DUALSTACK_ENDPOINT", "FALSE"),
		"endpoint discovery off":  lambdaEnv("AWS_ENABLE_ENDPOINT_DISCOVERY", "false"),
		"endpoint discovery on":   lambdaEnv("AWS_ENABLE_ENDPOINT_DISCOVERY", "TRUE"),
		"endpoint discovery auto": lambdaEnv("AWS_ENABLE_ENDPOINT_DISCOVERY", "auto"),
		"adaptive retries":        lambdaEnv("AWS_RETRY_MODE", "adaptive", "AWS_MAX_ATTEMPTS", "7"),
		"standard retries":        lambdaEnv("AWS_RETRY_MODE", "standard"),
		"max attempts":            lambdaEnv("AWS_MAX_ATTEMPTS", "2"),
		"max attempts 0":          lambdaEnv("AWS_MAX_ATTEMPTS", "0"),
		"default region only": {
			"AWS_DEFAULT_REGION":    "ap-south-1",
			"AWS_ACCESS_KEY_ID":     akid,
			"AWS_SECRET_ACCESS_KEY": secret,
		},
		"empty region":                 lambdaEnv("AWS_REGION", "", "AWS_DEFAULT_REGION", "ap-south-1"),
		"region before default region": lambdaEnv("AWS_REGION", "eu-north-1", "AWS_DEFAULT_REGION", "ap-south-1"),
		"old credential names": {
			"AWS_REGION":        "eu-west-3",
			"AWS_ACCESS_KEY":    akid,
			"AWS_SECRET_KEY":    secret,
			"AWS_SESSION_TOKEN": "awsenv-token",
		},
		"access key without secret": {"AWS_REGION": "eu-west-3", "AWS_ACCESS_KEY_ID": akid},
		"defaults mode standard":    lambdaEnv("AWS_DEFAULTS_MODE", "standard"),
		"defaults mode auto":        lambdaEnv("AWS_DEFAULTS_MODE", "auto"),
		"defaults mode upper case":  lambdaEnv("AWS_DEFAULTS_MODE", "IN-REGION"),
		"defaults mode legacy":      lambdaEnv("AWS_DEFAULTS_MODE", "legacy"),
		"account-id mode required":  lambdaEnv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "required", "AWS_ACCOUNT_ID", "123456789012"),
		"checksums upper case": lambdaEnv(
			"AWS_REQUEST_CHECKSUM_CALCULATION", "WHEN_REQUIRED",
			"AWS_RESPONSE_CHECKSUM_VALIDATION", "When_Supported"),
		"smallest compression size": lambdaEnv("AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES", "0"),
		"largest compression size":  lambdaEnv("AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES", "10485760"),
		"compression and skew correction on": lambdaEnv(
			"AWS_DISABLE_REQUEST_COMPRESSION", "FALSE",
			"AWS_DISABLE_CLOCK_SKEW_CORRECTION", "false"),
		"blank auth schemes": lambdaEnv("AWS_AUTH_SCHEME_PREFERENCE", " , ,"),
		"other SDK settings": lambdaEnv(
			"AWS_ACCOUNT_ID", "123456789012",
			"AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled",
			"AWS_SDK_UA_APP_ID", "leasehold-test",
			"AWS_REQUEST_CHECKSUM_CALCULATION", "when_required",
			"AWS_RESPONSE_CHECKSUM_VALIDATION", "when_required",
			"AWS_DISABLE_REQUEST_COMPRESSION", "true",
			"AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES", "100",
			"AWS_DISABLE_CLOCK_SKEW_CORRECTION", "true",
			"AWS_USE_FIPS_ENDPOINT", "true",
			"AWS_USE_DUALSTACK_ENDPOINT", "true",
			"AWS_ENABLE_ENDPOINT_DISCOVERY", "true",
			"AWS_AUTH_SCHEME_PREFERENCE", "sigv4a, sigv4"),
		"no credentials": {"AWS_REGION": "eu-west-3"},
	}
	for name, vars := range cases {
		t.Run(name, func(t *testing.T) {
			setIsolatedEnv(t, vars)
			got, err := awsenv.Load()
			if err != nil {
				t.Fatal(err)
			}
			want, err := config.LoadDefaultConfig(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if g, w := describe(t, got), describe(t, want); g != w {
				t.Errorf("Load gives\n%s\nLoadDefaultConfig gives\n%s", g, w)
			}
		})
	}
}

// setIsolatedEnv is setEnv with LoadDefaultConfig's shared files and
// instance metadata service out of the way.
func setIsolatedEnv(t *testing.T, vars map[string]string) {
	t.Helper()
	dir := t.TempDir()
	vars["AWS_CONFIG_FILE"] = filepath.Join(dir, "config")
	vars["AWS_SHARED_CREDENTIALS_FILE"] = filepath.Join(dir, "credentials")
	vars["AWS_EC2_METADATA_DISABLED"] = "true"
	setEnv(t, vars)
}

// TestServiceEndpointNames checks the variable that Load's configuration
// source reads for a service's endpoint against the SDK's own environment
// source, for service IDs other than the functions' two, spaces included.
func TestServiceEndpointNames(t *testing.T) {
	type endpointSource interface {
		GetServiceBaseEndpoint(context.Context, string) (string, bool, error)
	}
	setEnv(t, lambdaEnv(
		"AWS_ENDPOINT_URL_API_GATEWAY", "http://127.0.0.1:4730",
		"AWS_ENDPOINT_URL_LAMBDA", "http://127.0.0.1:4731",
		"AWS_ENDPOINT_URL_COGNITO_IDENTITY_PROVIDER", "http://127.0.0.1:4732"))
	cfg, err := awsenv.Load()
	if err != nil {
		t.Fatal(err)
	}
	env, err := config.NewEnvConfig()
	if err != nil {
		t.Fatal(err)
	}
	got, ok := cfg.ConfigSources[0].(endpointSource)
	if !ok {
		t.Fatalf("Load's configuration source %T has no GetServiceBaseEndpoint", cfg.ConfigSources[0])
	}
	for _, id := range []string{"API Gateway", "Lambda", "lambda", "Cognito Identity Provider", "SQS", "EventBridge"} {
		g, gFound, _ := got.GetServiceBaseEndpoint(t.Context(), id)
		w, wFound, _ := env.GetServiceBaseEndpoint(t.Context(), id)
		if g != w || gFound != wFound {
			t.Errorf("endpoint of %q: Load's source gives %q/%v, the SDK's %q/%v", id, g, gFound, w, wFound)
		}
	}
}

// describe prints what the two functions' clients take from cfg.
func describe(t *testing.T, cfg aws.Config) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "region %q base endpoint %s retry %q/%d defaults %q/%+v app %q account-id mode %q checksums %d/%d compression %v/%d skew %v auth %q\n",
		cfg.Region, deref(cfg.BaseEndpoint), cfg.RetryMode, cfg.RetryMaxAttempts, cfg.DefaultsMode, cfg.RuntimeEnvironment,
		cfg.AppID, cfg.AccountIDEndpointMode, cfg.RequestChecksumCalculation, cfg.ResponseChecksumValidation,
		cfg.DisableRequestCompression, cfg.RequestMinCompressSizeBytes, cfg.DisableClockSkewCorrection, cfg.AuthSchemePreference)
	creds, err := cfg.Credentials.Retrieve(t.Context())
	if err != nil {
		fmt.Fprintf(&b, "credentials: none\n")
	} else {
		fmt.Fprintf(&b, "credentials %q %q %q account %q source %q\n",
			creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken, creds.AccountID, creds.Source)
	}
	q := sqs.NewFromConfig(cfg).Options()
	fmt.Fprintf(&b, "sqs: region %q endpoint %s retryer %T/%d fips %d dualstack %d\n",
		q.Region, deref(q.BaseEndpoint), q.Retryer, q.Retryer.MaxAttempts(),
		q.EndpointOptions.UseFIPSEndpoint, q.EndpointOptions.UseDualStackEndpoint)
	d := dynamodb.NewFromConfig(cfg).Options()
	fmt.Fprintf(&b, "dynamodb: region %q endpoint %s retryer %T/%d fips %d dualstack %d discovery %d account-id mode %q",
		d.Region, deref(d.BaseEndpoint), d.Retryer, d.Retryer.MaxAttempts(),
		d.EndpointOptions.UseFIPSEndpoint, d.EndpointOptions.UseDualStackEndpoint,
		d.EndpointDiscovery.EnableEndpointDiscovery, d.AccountIDEndpointMode)
	return b.String()
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestMalformedValuesFail checks that each value LoadDefaultConfig
// rejects fails Load too, with an error that names the variable.
func TestMalformedValuesFail(t *testing.T) {
	for _, kv := range [][2]string{
		{"AWS_MAX_ATTEMPTS", "many"},
		{"AWS_MAX_ATTEMPTS", "2.5"},
		{"AWS_RETRY_MODE", "sometimes"},
		{"AWS_RETRY_MODE", "Standard"},
		{"AWS_USE_FIPS_ENDPOINT", "perhaps"},
		{"AWS_USE_DUALSTACK_ENDPOINT", "1"},
		{"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "yes"},
		{"AWS_ENABLE_ENDPOINT_DISCOVERY", "sometimes"},
		{"AWS_DEFAULTS_MODE", "fast"},
		{"AWS_ACCOUNT_ID_ENDPOINT_MODE", "always"},
		{"AWS_ACCOUNT_ID_ENDPOINT_MODE", "Preferred"},
		{"AWS_REQUEST_CHECKSUM_CALCULATION", "always"},
		{"AWS_RESPONSE_CHECKSUM_VALIDATION", "never"},
		{"AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES", "big"},
		{"AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES", "-1"},
		{"AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES", "10485761"},
		{"AWS_DISABLE_REQUEST_COMPRESSION", "1"},
		{"AWS_DISABLE_CLOCK_SKEW_CORRECTION", "no"},
	} {
		t.Run(kv[0]+"="+kv[1], func(t *testing.T) {
			setIsolatedEnv(t, lambdaEnv(kv[0], kv[1]))
			if _, err := config.LoadDefaultConfig(t.Context()); err == nil {
				t.Fatalf("%s=%s: LoadDefaultConfig succeeded; the case no longer belongs here", kv[0], kv[1])
			}
			_, err := awsenv.Load()
			if err == nil {
				t.Fatalf("%s=%s: Load succeeded", kv[0], kv[1])
			}
			if !strings.Contains(err.Error(), kv[0]) {
				t.Errorf("%s=%s: Load's error %q does not name the variable", kv[0], kv[1], err)
			}
		})
	}
}

// recorder is an AWS endpoint that answers every call with an empty JSON
// object and keeps what it was sent.
type recorder struct {
	mu    sync.Mutex
	calls []string // X-Amz-Target, then the Authorization header's credential scope
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	auth := req.Header.Get("Authorization")
	if i := strings.Index(auth, "Credential="); i >= 0 {
		auth, _, _ = strings.Cut(auth[i+len("Credential="):], ",")
	}
	r.mu.Lock()
	r.calls = append(r.calls, req.Header.Get("X-Amz-Target")+" "+auth)
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_, _ = io.WriteString(w, "{}")
}

func (r *recorder) took() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// TestCallsReachTheConfiguredEndpoints sends a call of each client to the
// endpoint its AWS_ENDPOINT_URL_* names, signed with the environment's
// access key and region.
func TestCallsReachTheConfiguredEndpoints(t *testing.T) {
	var sqsRec, ddbRec recorder
	sqsSrv := httptest.NewServer(&sqsRec)
	defer sqsSrv.Close()
	ddbSrv := httptest.NewServer(&ddbRec)
	defer ddbSrv.Close()
	setEnv(t, lambdaEnv("AWS_ENDPOINT_URL_SQS", sqsSrv.URL, "AWS_ENDPOINT_URL_DYNAMODB", ddbSrv.URL, "AWS_MAX_ATTEMPTS", "1"))
	cfg, err := awsenv.Load()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sqs.NewFromConfig(cfg).ListQueues(t.Context(), &sqs.ListQueuesInput{}); err != nil {
		t.Fatalf("SQS call: %v", err)
	}
	if _, err := dynamodb.NewFromConfig(cfg).ListTables(t.Context(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("DynamoDB call: %v", err)
	}
	date := func(calls []string) string { // the scope's second part
		if len(calls) != 1 {
			return ""
		}
		parts := strings.Split(calls[0], "/")
		if len(parts) < 2 {
			return ""
		}
		return parts[1]
	}
	for _, c := range []struct {
		name, target, service string
		rec                   *recorder
	}{
		{"SQS", "AmazonSQS.ListQueues", "sqs", &sqsRec},
		{"DynamoDB", "DynamoDB_20120810.ListTables", "dynamodb", &ddbRec},
	} {
		calls := c.rec.took()
		want := []string{fmt.Sprintf("%s %s/%s/eu-west-3/%s/aws4_request", c.target, akid, date(calls), c.service)}
		if fmt.Sprint(calls) != fmt.Sprint(want) {
			t.Errorf("%s endpoint got %q, want %q", c.name, calls, want)
		}
	}
}

func TestNoCredentials(t *testing.T) {
	srv := httptest.NewServer(&recorder{})
	defer srv.Close()
	setEnv(t, map[string]string{"AWS_REGION": "eu-west-3", "AWS_ENDPOINT_URL": srv.URL})
	cfg, err := awsenv.Load()
	if err != nil {
		t.Fatalf("Load without credentials: %v", err)
	}
	_, err = sqs.NewFromConfig(cfg).ListQueues(context.Background(), &sqs.ListQueuesInput{})
	if !errors.Is(err, awsenv.ErrNoCredentials) {
		t.Errorf("call without credentials: %v, want ErrNoCredentials", err)
	}
}
