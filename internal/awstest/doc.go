// Package awstest gives integration tests an AWS config for the local stack
// and per-test DynamoDB tables and SQS queues built from the project's single
// resource definition, localstack/resources.json.
//
// # The local stack
//
// `make test` starts the stack (scripts/stack.sh: one moto server serving
// DynamoDB and SQS on 127.0.0.1), exports AWS_ENDPOINT_URL_DYNAMODB,
// AWS_ENDPOINT_URL_SQS, AWS_REGION and test credentials, and sets
// LEASEHOLD_REQUIRE_STACK=1. The SDK reaches the stack only through those
// standard variables; this package never hard-codes an endpoint.
//
// Without the endpoint variables, [Config] skips the test with a message
// saying how to run it; with LEASEHOLD_REQUIRE_STACK=1 it fails instead, so
// CI cannot pass by skipping.
//
// # Isolation
//
// [NewTable] and [NewQueues] give every call its own randomly suffixed
// resources and delete them in t.Cleanup, so tests can run in parallel and
// leave nothing behind.
package awstest
