package leasehold

import (
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/leasehold/leasehold/internal/awsenv"
)

// LambdaAWSConfig returns the AWS SDK configuration of a Lambda function
// from its environment alone, as leasehold's own functions build theirs:
// the credentials and region Lambda sets, AWS_ENDPOINT_URL_<SERVICE> and
// the SDK's other environment settings, but no shared config files,
// profiles, SSO, web identity or instance metadata. A bootstrap that uses
// it instead of config.LoadDefaultConfig leaves the SDK's credential chain
// out, about 1.5 MB. Without credentials in the environment it succeeds,
// and every call fails saying which variables to set. Off Lambda, use
// config.LoadDefaultConfig.
func LambdaAWSConfig() (aws.Config, error) { return awsenv.Load() }
