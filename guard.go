package leasehold

import (
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/leasehold/leasehold/internal/awsenv"
)

// GuardHTTP wraps an SDK HTTP client (nil: the SDK's default) so that the
// SDK cannot lose an answer the server sent, as it otherwise can on a
// loaded machine ("use of closed network connection"; a ReceiveMessage
// whose answer is lost hides its messages for the visibility timeout).
// NewClient, NewWorker, NewWorkerFromEnv and serve.RunFromEnv apply it to
// the configuration they are given; SDK clients of your own want it too:
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	...
//	cfg.HTTPClient = leasehold.GuardHTTP(cfg.HTTPClient)
//
// Apply it after LoadDefaultConfig, not through config.WithHTTPClient:
// LoadDefaultConfig adds AWS_CA_BUNDLE's certificates only to the SDK's own
// client type. A client already guarded is returned as it is.
func GuardHTTP(c aws.HTTPClient) aws.HTTPClient { return awsenv.GuardHTTP(c) }
